// A steady stream of track calls through the official @segment/analytics-node, as a server
// sends them: argv = collector URL, write key, events per second, seconds, output file.
// Each call is a "Tick" with properties.seq (0, 1, ...); the library's defaults (flushAt 15,
// flushInterval 10 s) batch them. Writes {"sent": [[seq, messageId, ms when called], ...],
// "errors": [...]} to the output file once every call is delivered (bench_freshness.py).
const fs = require("fs");
const { Analytics } = require("@segment/analytics-node");

const [url, writeKey, rate, seconds, out] = process.argv.slice(2);
const total = Math.round(Number(rate) * Number(seconds));
const analytics = new Analytics({ writeKey, host: url });
const sent = [];
const errors = [];
analytics.on("error", (e) => errors.push(String(e.reason || e.code || e)));

let seq = 0;
const t0 = Date.now();
const timer = setInterval(() => {
  // as many calls as the elapsed time asks for: a steady rate whatever the timer's jitter
  const due = Math.min(total, Math.floor(((Date.now() - t0) / 1000) * Number(rate)));
  while (seq < due) {
    const s = seq++;
    const at = Date.now();
    analytics.track(
      { userId: `user-${s % 200}`, event: "Tick", properties: { seq: s } },
      (err, ctx) => (err ? errors.push(String(err)) : sent.push([s, ctx.event.messageId, at])),
    );
  }
  if (seq >= total) {
    clearInterval(timer);
    analytics.closeAndFlush({ timeout: 120000 }).then(() => {
      fs.writeFileSync(out, JSON.stringify({ sent, errors }));
    });
  }
}, 50);
