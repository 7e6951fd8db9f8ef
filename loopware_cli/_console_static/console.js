// loopware console: reload the page when the audit chain or the waiting gates change.
// /state answers a short digest of both; the page was rendered with the digest of its time
// (body[data-state]). A reason being typed is never lost: the page then says so instead.
(function () {
  "use strict";
  var rendered = document.body.getAttribute("data-state");
  if (!rendered) { return; }
  function typing() {
    var fields = document.querySelectorAll("input[type=text], textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== "" || fields[i] === document.activeElement) { return true; }
    }
    return false;
  }
  function poll() {
    fetch("/state", { credentials: "same-origin", cache: "no-store" })
      .then(function (answer) { return answer.ok ? answer.text() : rendered; })
      .then(function (now) {
        if (now === rendered) { return; }
        if (typing()) { document.getElementById("changed").hidden = false; return; }
        window.location.reload();
      })
      .catch(function () { /* the console stopped: keep the page as it is */ });
  }
  window.setInterval(poll, 1500);
})();
