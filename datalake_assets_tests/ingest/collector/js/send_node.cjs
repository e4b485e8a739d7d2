// Sends every call type through @segment/analytics-node to the collector at argv[2] with
// write key argv[3]; prints {"sent": {messageId: type}, "errors": [...]} as JSON.
const { Analytics } = require("@segment/analytics-node");

const [url, writeKey, users] = [process.argv[2], process.argv[3], Number(process.argv[4] || 5)];
const analytics = new Analytics({ writeKey, host: url, flushAt: 7, flushInterval: 200,
                                  maxRetries: 3 });
const sent = {};
const errors = [];
analytics.on("error", (e) => errors.push(String(e.reason || e.code || e)));

function done(type) {
  return (err, ctx) => {
    if (err) errors.push(String(err));
    else sent[ctx.event.messageId] = type;
  };
}

for (let u = 0; u < users; u++) {
  const userId = `node-user-${u}`;
  const anonymousId = `node-anon-${u}`;
  analytics.identify({ userId, traits: { email: `${userId}@example.com`, plan: "pro" } },
                     done("identify"));
  analytics.track({ userId, event: "Order Completed", properties: { revenue: 10 + u } },
                  done("track"));
  analytics.track({ anonymousId, event: "Signed In", properties: { method: "email" },
                    context: { ip: "203.0.113.9" } }, done("track"));
  analytics.page({ userId, category: "Docs", name: "Home", properties: { path: "/home" } },
                 done("page"));
  analytics.screen({ userId, name: "Main", properties: { variant: "b" } }, done("screen"));
  analytics.group({ userId, groupId: `group-${u % 2}`, traits: { name: "ACME" } },
                  done("group"));
  analytics.alias({ userId, previousId: anonymousId }, done("alias"));
}
analytics.closeAndFlush({ timeout: 20000 }).then(() => {
  process.stdout.write(JSON.stringify({ sent, errors }));
});
