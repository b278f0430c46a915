// openWeights() of a download in headless Chromium: a safetensors file written by Node is served
// by the test server (scripts/serve.mjs, whose `pause`, `abort` and `ranges` query parameters
// make it stop, cut the body or honour Range requests) and opened from fetch()'s Response and
// from a ReadableStream. Checked: openWeights resolves while the body is still arriving (the
// server pauses after the header) and constantTensor() waits for the bytes; every tensor's values
// against the values Node wrote; the OPFS copy (`cached`) has the file's length and Node's
// SHA-256, its record says so, and openWeights(handle) of it gives the same values; a body cut
// mid-tensor rejects the pending constantTensor() and `cached` with errors naming the file and
// the bytes received, and leaves no OPFS entry; with Accept-Ranges the cut body resumes through a
// Range request; a file in the cache directory without a record is refused; a stream without a
// byteLength or cacheName, a bad cacheName, a non-200 Response and a used body are TypeErrors; a
// declared length beyond the quota is a QuotaExceededError that leaves nothing; progress reaches
// the total; a destroyed context is an InvalidStateError.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { start, openHarness, ROOT } from './browser.mjs';

// Three tensors over several 4 MiB pieces: float32 a (4 MiB), float32 b (8 MiB), bfloat16 c.
const A = 1 << 20;
const B = 2 << 20;
const C = 1000;
const header = {
  a: { dtype: 'F32', shape: [A], data_offsets: [0, 4 * A] },
  b: { dtype: 'F32', shape: [B], data_offsets: [4 * A, 4 * A + 4 * B] },
  c: { dtype: 'BF16', shape: [C], data_offsets: [4 * A + 4 * B, 4 * A + 4 * B + 2 * C] },
};
const json = Buffer.from(JSON.stringify(header));
const prefix = Buffer.alloc(8);
prefix.writeBigUInt64LE(BigInt(json.length));
const a = Float32Array.from({ length: A }, (_, i) => (i % 1013) - 506.25);
const b = Float32Array.from({ length: B }, (_, i) => Math.fround(Math.sin(i) * 1000));
// bfloat16: the top half of a float32 whose low half is zero, so the value is exact.
const cValues = Float32Array.from({ length: C }, (_, i) => (i % 9) - 4.5);
const cBits = Uint16Array.from(new Uint32Array(cValues.buffer), (u) => u >>> 16);
const bytes = Buffer.concat([prefix, json, Buffer.from(a.buffer), Buffer.from(b.buffer), Buffer.from(cBits.buffer)]);
const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
const dir = path.join(ROOT, 'out', 'download');
fs.mkdirSync(dir, { recursive: true });
for (const name of ['model.safetensors', 'cut.safetensors', 'resumed.safetensors']) fs.writeFileSync(path.join(dir, name), bytes);

const { browser, url, close } = await start();
let failed = 0;
try {
  const page = await openHarness(browser, url, 'weights_download');
  const results = await page.evaluate(async ({ total, headerBytes, sha256, A, B, C }) => {
    const out = [];
    const check = (ok, name, detail = '') => out.push({ ok: !!ok, name, detail });
    const want = {
      a: Float32Array.from({ length: A }, (_, i) => (i % 1013) - 506.25),
      b: Float32Array.from({ length: B }, (_, i) => Math.fround(Math.sin(i) * 1000)),
      c: Float32Array.from({ length: C }, (_, i) => (i % 9) - 4.5),
    };
    const context = await navigator.ml.createContext();
    // Each tensor times one, read back: exact values or the first mismatch.
    const values = async (file) => {
      const tensors = await Promise.all(['a', 'b', 'c'].map((n) => file.constantTensor(n)));
      const builder = new MLGraphBuilder(context);
      const one = builder.input('one', { dataType: 'float32', shape: [1] });
      const graph = await builder.build(Object.fromEntries(tensors.map((t, k) => ['abc'[k], builder.mul(builder.constant(t), one)])));
      const onet = await context.createTensor({ dataType: 'float32', shape: [1], writable: true });
      context.writeTensor(onet, new Float32Array([1]));
      const outs = {};
      for (const n of 'abc') outs[n] = await context.createTensor({ dataType: 'float32', shape: [want[n].length], readable: true });
      context.dispatch(graph, { one: onet }, outs);
      for (const n of 'abc') {
        const got = new Float32Array(await context.readTensor(outs[n]));
        const i = got.findIndex((v, k) => !Object.is(v, want[n][k]));
        if (got.length !== want[n].length || i >= 0) return `${n}[${i}] = ${got[i]}, want ${want[n][i]}`;
      }
      graph.destroy();
      return 'exact';
    };
    const hex = (buffer) => Array.from(new Uint8Array(buffer), (x) => x.toString(16).padStart(2, '0')).join('');
    const weights = async () => (await navigator.storage.getDirectory()).getDirectoryHandle('webnn-wgpu-weights');
    const entries = async (d) => {
      const names = [];
      for await (const name of d.keys()) names.push(name);
      return names.sort();
    };
    const record = async (name) => JSON.parse(await (await (await (await (await weights())
      .getDirectoryHandle('.records')).getFileHandle(`${name}.json`)).getFile()).text());
    const rejection = async (promise) => {
      try {
        await promise;
        return null;
      } catch (e) {
        return e;
      }
    };

    // A Response whose body pauses for a second after the header: openWeights resolves first.
    {
      const progress = [];
      const response = await fetch(`/out/download/model.safetensors?pause=${headerBytes + 1000}`);
      const file = await context.openWeights(response, { onProgress: (loaded, all) => progress.push([loaded, all]) });
      const atOpen = progress.at(-1)?.[0] ?? 0;
      check(atOpen < total, 'openWeights(Response) resolves while the body is still arriving', `${atOpen} of ${total} bytes at resolve`);
      check(file.tensors.map((t) => `${t.name}:${t.dataType}[${t.shape}]`).join(' ') === `a:float32[${A}] b:float32[${B}] c:float32[${C}]`,
        'the header\'s tensors', file.tensors.map((t) => t.name).join(' '));
      const got = await values(file);
      check(got === 'exact', 'tensors that were still downloading: exact values', got);
      const handle = await file.cached;
      check(handle instanceof FileSystemFileHandle && handle.name === 'model.safetensors', 'cached resolves to the OPFS handle', handle?.name);
      const stored = await handle.getFile();
      check(stored.size === total, 'the OPFS file has the file\'s length', `${stored.size} of ${total}`);
      const digest = hex(await crypto.subtle.digest('SHA-256', await stored.arrayBuffer()));
      check(digest === sha256, 'the OPFS file has the file\'s SHA-256 (Node\'s)', digest);
      const r = await record('model.safetensors');
      check(r.byteLength === total && r.sha256 === sha256 && r.url.endsWith('/out/download/model.safetensors?pause=' + (headerBytes + 1000)),
        'the record gives the length, the SHA-256 and the URL', JSON.stringify(r));
      check(progress.length > 1 && progress.every(([l, t], i) => t === total && (i === 0 || l >= progress[i - 1][0]))
        && progress.at(-1)[0] === total, 'onProgress counts the whole file up to its total', `${progress.length} calls, last ${progress.at(-1)}`);
      check(await values(await context.openWeights(handle)) === 'exact', 'openWeights(cached handle): exact values');
      check(await file.cached === handle, 'cached keeps its handle');
    }

    // The body is cut mid-tensor b: pending tensors reject, naming the file and the bytes. (The
    // pause lets the header be read first: bytes that arrived before a cut are not served after.)
    {
      const response = await fetch(`/out/download/cut.safetensors?pause=${headerBytes + 1000}&abort=6000000`);
      const file = await context.openWeights(response);
      const error = await rejection(file.constantTensor('b'));
      check(error instanceof DOMException && ['NetworkError', 'DataError'].includes(error.name)
        && /cut\.safetensors/.test(error.message) && new RegExp(`interrupted after \\d+ of ${total} bytes`).test(error.message),
        'a cut body rejects constantTensor() naming the file and the bytes received', error && `${error.name}: ${error.message}`);
      const cached = await rejection(file.cached);
      check(cached instanceof DOMException && cached.name === 'NetworkError' && /cut\.safetensors.*\d+ of \d+ bytes/.test(cached.message),
        'cached rejects with a NetworkError', cached && `${cached.name}: ${cached.message}`);
      const left = await entries(await weights());
      const records = await entries(await (await weights()).getDirectoryHandle('.records'));
      check(!left.includes('cut.safetensors') && !records.includes('cut.safetensors.json'), 'a cut download leaves no OPFS entry',
        `${left} | ${records}`);
      check(await rejection(file.constantTensor('c')) instanceof DOMException, 'later constantTensor() calls reject too');
    }

    // With Accept-Ranges the cut body resumes from where it stopped.
    {
      const response = await fetch('/out/download/resumed.safetensors?ranges&abort=6000000');
      const file = await context.openWeights(response);
      const got = await values(file);
      check(got === 'exact', 'a cut body with Accept-Ranges resumes (Range request): exact values', got);
      const stored = await (await file.cached).getFile();
      const digest = hex(await crypto.subtle.digest('SHA-256', await stored.arrayBuffer()));
      check(stored.size === total && digest === sha256 && (await record('resumed.safetensors')).sha256 === sha256,
        'the resumed file and its record have the right length and SHA-256', `${stored.size} ${digest}`);
    }

    // A ReadableStream with its length and name, in uneven chunks.
    {
      const all = new Uint8Array(await (await fetch('/out/download/model.safetensors')).arrayBuffer());
      let at = 0;
      const stream = () => new ReadableStream({
        pull(controller) {
          if (at >= all.length) controller.close();
          else controller.enqueue(all.slice(at, at += 777777));
        },
      });
      const file = await context.openWeights(stream(), { byteLength: total, cacheName: 'streamed.safetensors' });
      const got = await values(file);
      check(got === 'exact', 'openWeights(ReadableStream, {byteLength, cacheName}): exact values', got);
      const stored = await (await file.cached).getFile();
      check(stored.size === total && (await record('streamed.safetensors')).sha256 === sha256, 'the streamed file is cached whole',
        `${stored.size}`);
      const typeErrors = [
        ['a stream without byteLength', () => context.openWeights(stream(), { cacheName: 'x' })],
        ['a stream without cacheName', () => context.openWeights(stream(), { byteLength: 10 })],
        ['a cacheName with a slash', () => context.openWeights(stream(), { byteLength: 10, cacheName: 'a/b' })],
        ['a cacheName starting with a dot', () => context.openWeights(stream(), { byteLength: 10, cacheName: '.records' })],
        ['a negative byteLength', () => context.openWeights(stream(), { byteLength: -1, cacheName: 'x' })],
        ['a 404 Response', async () => context.openWeights(await fetch('/out/download/missing.safetensors'))],
        ['a used Response', async () => {
          const r = await fetch('/out/download/model.safetensors');
          await r.arrayBuffer();
          return context.openWeights(r);
        }],
      ];
      for (const [what, call] of typeErrors) {
        const e = await rejection(call());
        check(e instanceof TypeError, `${what} is a TypeError`, e && `${e.name}: ${e.message}`);
      }
    }

    // More than the origin may store: QuotaExceededError naming the bytes, nothing left.
    {
      const huge = 2 ** 52;
      const e = await rejection(context.openWeights(new ReadableStream(), { byteLength: huge, cacheName: 'huge.bin' }));
      check(e instanceof DOMException && e.name === 'QuotaExceededError' && e.message.includes(String(huge)),
        'a length beyond the quota is a QuotaExceededError naming the bytes', e && `${e.name}: ${e.message}`);
      check(!(await entries(await weights())).includes('huge.bin'), 'and leaves no entry');
    }

    // A file in the cache directory without a record (as a crash mid-download leaves it).
    {
      const handle = await (await weights()).getFileHandle('partial.safetensors', { create: true });
      const w = await handle.createWritable();
      await w.write(new Uint8Array(await (await fetch('/out/download/model.safetensors')).arrayBuffer()));
      await w.close();
      const e = await rejection(context.openWeights(handle));
      check(e instanceof DOMException && e.name === 'DataError' && /partial\.safetensors is an incomplete download/.test(e.message),
        'a cache file without a record is not taken for complete', e && `${e.name}: ${e.message}`);
    }

    // A destroyed context.
    {
      const lost = await navigator.ml.createContext();
      lost.destroy();
      const e = await rejection(lost.openWeights(await fetch('/out/download/model.safetensors'), { cacheName: 'lost.safetensors' }));
      check(e instanceof DOMException && e.name === 'InvalidStateError', 'a destroyed context is an InvalidStateError', e && `${e.name}: ${e.message}`);
      check(!(await entries(await weights())).includes('lost.safetensors'), 'and starts no download');
    }
    await (await navigator.storage.getDirectory()).removeEntry('webnn-wgpu-weights', { recursive: true });
    return out;
  }, { total: bytes.length, headerBytes: 8 + json.length, sha256, A, B, C });
  for (const r of results) {
    if (!r.ok) failed++;
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.detail ? `: ${r.detail}` : ''}`);
  }
  console.log(`weights_download: ${results.length - failed} passed, ${failed} failed`);
} catch (e) {
  failed++;
  console.log(`FAIL harness: ${e.message.split('\n')[0]}`);
} finally {
  await close();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(failed === 0 ? 0 : 1);
