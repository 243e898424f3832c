// The Node client of internal/cli's exec tests: fetch each URL through
// undici's EnvHttpProxyAgent (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) and print
// one line each; exit 1 if any did not answer 200.
import { EnvHttpProxyAgent, fetch } from 'undici';

const dispatcher = new EnvHttpProxyAgent();
let failed = false;
for (const u of process.argv.slice(2)) {
  try {
    const r = await fetch(u, { dispatcher });
    const body = (await r.text()).trim();
    console.log(`${u} ${r.status} reason=${r.headers.get('x-airlock-reason') ?? ''} body=${JSON.stringify(body)}`);
    failed ||= r.status !== 200;
  } catch (e) {
    console.log(`${u} error ${e.cause?.message ?? e.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
