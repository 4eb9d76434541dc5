// The live view of a sweep (lookahead_runner/live/webui.py, --follow-sweep): every server life's Locust serves its
// web UI on the same port, one after another, so this page asks which Locust answers there (life.json) every two
// seconds. While none does, the runner is between lives (stopping one server, starting the next) or the sweep is
// over: a bar at the top says so. Once another life's Locust answers, the page reloads to show it: a tab left open
// follows the whole sweep.
(() => {
  "use strict";
  const follow = (window.templateArgs || {}).lookahead_follow;
  if (!follow) return;

  const bar = document.createElement("div");
  bar.className = "lookahead-follow";
  bar.setAttribute("role", "status");
  bar.style.cssText = "position:fixed;top:0;left:0;right:0;z-index:10000;padding:6px 12px;font:0.9rem sans-serif;" +
                      "background:#fff3cd;color:#664d03;border-bottom:1px solid #e0c46c;display:none";
  document.body.appendChild(bar);
  let inFlight = false;

  function say(text) {
    bar.textContent = text;
    bar.style.display = text ? "block" : "none";
  }

  async function check() {
    if (inFlight) return;
    inFlight = true;
    try {
      const response = await fetch(follow.url, { cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const now = await response.json();
      if (now.life !== follow.life) {
        say(`The next server life (${now.setting || "its setting"}) is under load: loading its live view...`);
        window.location.reload();
        return;
      }
      say("");
    } catch (error) {
      const done = follow.setting ? `${follow.setting} is over` : "This server life is over";
      say(`${done}: the sweep is starting its next server life, or has ended. This page shows the next life ` +
          "as soon as its load starts (the same address for the whole sweep).");
    } finally {
      inFlight = false;
    }
  }

  setInterval(check, follow.poll_ms);
})();
