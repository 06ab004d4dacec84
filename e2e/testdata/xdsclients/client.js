// An xDS conformance client on grpc-js with @grpc/grpc-js-xds: dials
// xds:///<host> with the bootstrap named by GRPC_XDS_BOOTSTRAP and answers
// commands read from stdin, one JSON object a line, with one JSON line on
// stdout (the protocol of client.py, which describes it). The probe's
// StringValue request is encoded by hand (field 1, a string). The modules
// come from hack/xdsclients.sh, found through NODE_PATH.
'use strict';
const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');
const readline = require('readline');

const METHOD = '/sluice.probe.v1.Probe/Hello';
const VERSION_KEY = 'x-probe-version';
const BATCH = 64; // calls in flight at once

xds.register();

function encode(s) {
  const b = Buffer.from(s);
  const len = [];
  let n = b.length;
  while (n >= 0x80) { len.push((n & 0x7f) | 0x80); n >>>= 7; }
  len.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...len]), b]);
}

const client = new grpc.Client('xds:///' + process.argv[2], grpc.credentials.createInsecure());

// hello makes one call and resolves to {version, error}.
function hello(metadata, timeoutMs) {
  return new Promise((resolve) => {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata || {})) md.set(k, v);
    // grpc-js runs the callback before it emits 'status' (which carries
    // the trailers): answer once both have happened.
    let error = null, version = null;
    const done = () => { if (error !== null && version !== null) resolve({ version, error }); };
    const call = client.makeUnaryRequest(METHOD, encode, (b) => b, 'hello', md,
      { deadline: Date.now() + timeoutMs, waitForReady: true },
      (err) => { error = err ? grpc.status[err.code] + ': ' + err.details : ''; done(); });
    call.on('status', (st) => {
      const v = st.metadata.get(VERSION_KEY);
      version = v.length > 0 ? String(v[0]) : '';
      done();
    });
  });
}

async function callMany(req) {
  const versions = {}, errors = {};
  let left = req.n;
  while (left > 0) {
    const batch = [];
    for (let i = 0; i < Math.min(BATCH, left); i++) batch.push(hello(req.metadata, req.timeout_ms || 5000));
    left -= batch.length;
    for (const r of await Promise.all(batch)) {
      if (r.error) errors[r.error] = (errors[r.error] || 0) + 1;
      else versions[r.version] = (versions[r.version] || 0) + 1;
    }
  }
  return { versions, errors };
}

async function main() {
  const start = process.hrtime.bigint();
  const deadline = Date.now() + 60000;
  let firstError = '', firstOk = false;
  for (;;) {
    const r = await hello({}, 10000);
    if (!r.error) { firstOk = true; break; }
    firstError = r.error;
    if (Date.now() > deadline) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const ready = { ready: firstOk, impl: 'grpc-js', version: require('@grpc/grpc-js/package.json').version,
    xds_version: require('@grpc/grpc-js-xds/package.json').version,
    first_call_ms: Math.round(Number(process.hrtime.bigint() - start) / 1e5) / 10 };
  if (firstError) ready.first_error = firstError;
  console.log(JSON.stringify(ready));
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const req = JSON.parse(line);
    if (req.cmd === 'quit') break;
    console.log(JSON.stringify(await callMany(req)));
  }
  client.close();
  process.exit(0);
}

main();
