// Print every status change the key may see, with graphql-ws (graphql-transport-ws).
//   npm install && QUEUELOG_URL=http://127.0.0.1:8000/graphql QUEUELOG_KEY=<key> node listener.mjs [count]
// Resume after a restart by passing the last cursor as AFTER=<cursor>.
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const url = (process.env.QUEUELOG_URL ?? "http://127.0.0.1:8000/graphql").replace(/^http/, "ws");
const count = Number(process.argv[2] ?? Infinity);
let after = process.env.AFTER ?? null;

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { authorization: `Bearer ${process.env.QUEUELOG_KEY}` },
  // graphql-ws would resubscribe with the first `after` and repeat events: resume here instead.
  retryAttempts: 0,
});

class GraphQLErrors extends Error {}

const query = `subscription($after: String) {
  jobStatusChanged(after: $after) { cursor status job { id type } }
}`;

let seen = 0;
async function listen() {
  // On a dropped connection, subscribe again from the last cursor: no gap, no duplicate.
  for (;;) {
    const events = client.iterate({ query, variables: { after } });
    try {
      for await (const result of events) {
        if (result.errors) throw new GraphQLErrors(JSON.stringify(result.errors));
        const e = result.data.jobStatusChanged;
        after = e.cursor;
        console.log(`${e.cursor} job ${e.job.id} ${e.job.type} ${e.status}`);
        if (++seen >= count) return;
      }
    } catch (err) {
      if (err instanceof GraphQLErrors) throw err;
      console.error(`connection lost (${err?.code ?? err}); resuming after ${after}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

await listen();
await client.dispose();
