// The CPU backend's threads in headless Chromium: a cross-origin isolated page (COOP/COEP) that
// asks for 3 threads gets the atomics build with two Web Workers (cpuThreads() is 3), and a page
// without isolation runs the plain build on one thread. Products large enough to be split between
// the threads (matmul with a constant or a computed B, a batched matmul, both GEMV paths, gemm
// with C, products whose B is dequantizeLinear of 8-bit constants, conv2d in both layouts) are checked against float64 references computed here, and the
// threaded results must equal the single-thread page's bit for bit: the threads split the output,
// never a sum, so the order of every addition is the same. Exits non-zero on any failure.
import { chromium } from 'playwright-core';
import { ROOT, CHROMIUM_ARGS, harnessReady, openPage } from './browser.mjs';
import { serve } from '../../scripts/serve.mjs';

let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
};

// Runs every case in a page; returns the page's facts and each case's output and float64 check.
async function runCases(page) {
  return page.evaluate(async () => {
    const { cpuThreads } = await import('/pkg/index.js');
    const out = { isolated: crossOriginIsolated, threads: await cpuThreads(), cases: {} };
    const context = await navigator.ml.createContext({ accelerated: false });
    out.accelerated = context.accelerated;
    let seed = 12345;
    const random = (n) => Float32Array.from({ length: n }, () => ((seed = (seed * 48271) % 2147483647) / 2147483647) * 2 - 1);
    const size = (shape) => shape.reduce((a, b) => a * b, 1);
    // C[m x n] = sum_p A(i, p) B(p, j), with A(i, p) = a[i * sa0 + p * sa1] and so on, in float64;
    // also the sum of |terms| for the tolerance.
    const product = (m, k, n, a, [sa0, sa1], b, [sb0, sb1]) => {
      const value = new Float64Array(m * n);
      const scale = new Float64Array(m * n);
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let s = 0;
          let t = 0;
          for (let p = 0; p < k; p++) {
            const v = a[i * sa0 + p * sa1] * b[p * sb0 + j * sb1];
            s += v;
            t += Math.abs(v);
          }
          value[i * n + j] = s;
          scale[i * n + j] = t;
        }
      }
      return { value, scale };
    };
    const run = async (name, inputs, build, expected, k) => {
      const b = new MLGraphBuilder(context);
      const operands = {};
      const feeds = {};
      for (const [key, [shape, data, constant, dataType = 'float32']] of Object.entries(inputs)) {
        const desc = { dataType, shape };
        if (constant) {
          operands[key] = b.constant(desc, data);
        } else {
          operands[key] = b.input(key, desc);
          feeds[key] = await context.createTensor({ ...desc, writable: true });
          context.writeTensor(feeds[key], data);
        }
      }
      const y = build(b, operands);
      const graph = await b.build({ y });
      const result = await context.createTensor({ dataType: 'float32', shape: y.shape, readable: true });
      context.dispatch(graph, feeds, { y: result });
      const got = new Float32Array(await context.readTensor(result));
      const { value, scale } = expected();
      const allowed = (4 * Math.sqrt(k) + 2) * 2 ** -24;
      let worst = null;
      for (let i = 0; i < got.length; i++) {
        const error = Math.abs(got[i] - value[i]);
        if (!(error <= allowed * scale[i] + 1e-30)) {
          worst = `element ${i}: ${got[i]} against ${value[i]}`;
          break;
        }
      }
      out.cases[name] = { length: got.length, expectedLength: value.length, worst, bits: Array.from(new Uint32Array(got.buffer)) };
    };

    // matmul 300 x 200 by a constant 200 x 700 (packed once) and by a computed one.
    for (const constant of [true, false]) {
      const [m, k, n] = [300, 200, 700];
      const A = random(m * k);
      const B = random(k * n);
      await run(`matmul ${m}x${k}x${n}${constant ? ' (constant B)' : ''}`, { a: [[m, k], A], b: [[k, n], B, constant] },
        (b, o) => b.matmul(o.a, o.b), () => product(m, k, n, A, [k, 1], B, [n, 1]), k);
    }
    {
      // A batch of 3 products of 70 x 300 by 300 x 150.
      const [batch, m, k, n] = [3, 70, 300, 150];
      const A = random(batch * m * k);
      const B = random(batch * k * n);
      await run('matmul [3, 70, 300] x [3, 300, 150]', { a: [[batch, m, k], A], b: [[batch, k, n], B] }, (b, o) => b.matmul(o.a, o.b), () => {
        const value = new Float64Array(batch * m * n);
        const scale = new Float64Array(batch * m * n);
        for (let t = 0; t < batch; t++) {
          const r = product(m, k, n, A.subarray(t * m * k), [k, 1], B.subarray(t * k * n), [n, 1]);
          value.set(r.value, t * m * n);
          scale.set(r.scale, t * m * n);
        }
        return { value, scale };
      }, k);
    }
    {
      // One row against rows of a constant (streamed rows), and gemm with bTranspose (streamed
      // columns, dot products) plus C.
      const [k, n] = [2000, 1500];
      const x = random(k);
      const W = random(k * n);
      await run('GEMV 1x2000 by 2000x1500', { x: [[1, k], x], w: [[k, n], W, true] }, (b, o) => b.matmul(o.x, o.w),
        () => product(1, k, n, x, [k, 1], W, [n, 1]), k);
      const Wt = random(n * k);
      const C = random(n);
      await run('gemm 1x2000 by (1500x2000)^T + C', { x: [[1, k], x], w: [[n, k], Wt, true], c: [[n], C, true] },
        (b, o) => b.gemm(o.x, o.w, { bTranspose: true, c: o.c }), () => {
          const r = product(1, k, n, x, [k, 1], Wt, [1, k]);
          r.value.forEach((v, j) => { r.value[j] = v + C[j]; r.scale[j] += Math.abs(C[j]); });
          return r;
        }, k + 1);
    }
    // Products whose B is dequantizeLinear(q, scale, zeroPoint) of 8-bit constants, a scale per
    // column or per tensor: B = (q - zeroPoint) * scale, the differences kept as int8 where they
    // fit (int8 with zero points 0, uint8 around 128) and as int16 where they do not (uint8 with
    // any zero points); one row (GEMV) and many, gemm with bTranspose and C.
    const integers = (n, lo, hi) => Int32Array.from(random(n), (v) => lo + Math.min(hi - lo, Math.floor(((v + 1) / 2) * (hi - lo + 1))));
    const quantized = [
      { name: 'matmul 70x333 by dequantizeLinear(int8 333x517, scale per column)', m: 70, k: 333, n: 517, type: 'int8', q: [-127, 127], zp: [0, 0], perColumn: true },
      { name: 'GEMV 1x1000 by dequantizeLinear(uint8 1000x1500, zero points per column)', m: 1, k: 1000, n: 1500, type: 'uint8', q: [0, 255], zp: [0, 255], perColumn: true },
      { name: 'gemm 1x1000 by dequantizeLinear(int8 1500x1000)^T + C', m: 1, k: 1000, n: 1500, type: 'int8', q: [-127, 127], zp: [0, 0], perColumn: true, transposed: true },
      { name: 'gemm 40x300 by dequantizeLinear(uint8 300x200, one scale)^T + C', m: 40, k: 300, n: 200, type: 'uint8', q: [0, 255], zp: [128, 128], perColumn: false, transposed: true },
    ];
    for (const { name, m, k, n, type, q, zp, perColumn, transposed } of quantized) {
      const A = random(m * k);
      const Q = integers(k * n, ...q);
      const params = perColumn ? n : 1;
      const S = Float32Array.from(random(params), (v) => 0.002 + 0.01 * Math.abs(v));
      const Z = integers(params, ...zp);
      const C = random(n);
      const typed = (values) => (type === 'int8' ? Int8Array.from(values) : Uint8Array.from(values));
      // q is [k, n], or [n, k] for gemm's bTranspose; the parameters lie along n.
      const qShape = transposed ? [n, k] : [k, n];
      const pShape = !perColumn ? [1, 1] : transposed ? [n, 1] : [1, n];
      const B = new Float64Array(k * n);
      for (let p = 0; p < k; p++) {
        for (let j = 0; j < n; j++) {
          const t = perColumn ? j : 0;
          B[p * n + j] = (Q[transposed ? j * k + p : p * n + j] - Z[t]) * S[t];
        }
      }
      await run(name, { a: [[m, k], A], q: [qShape, typed(Q), true, type], s: [pShape, S, true], z: [pShape, typed(Z), true, type], c: [[n], C, true] },
        (b, o) => {
          const w = b.dequantizeLinear(o.q, o.s, o.z);
          return transposed ? b.gemm(o.a, w, { bTranspose: true, c: o.c }) : b.matmul(o.a, w);
        }, () => {
          const r = product(m, k, n, A, [k, 1], B, [n, 1]);
          if (transposed) r.value.forEach((v, i) => { r.value[i] = v + C[i % n]; r.scale[i] += Math.abs(C[i % n]); });
          return r;
        }, k + 1);
    }
    // conv2d 3x3, 32 -> 48 channels, 40 x 40, padding 1, in both layouts.
    for (const layout of ['nchw', 'nhwc']) {
      const [C, O, H, W] = [32, 48, 40, 40];
      const input = random(C * H * W);
      const filter = random(O * C * 9);
      const inShape = layout === 'nchw' ? [1, C, H, W] : [1, H, W, C];
      const at = (c, y, x) => (layout === 'nchw' ? input[(c * H + y) * W + x] : input[(y * W + x) * C + c]);
      await run(`conv2d 3x3 ${C}->${O} ${H}x${W} ${layout}`, { x: [inShape, input], f: [[O, C, 3, 3], filter, true] },
        (b, o) => b.conv2d(o.x, o.f, { padding: [1, 1, 1, 1], inputLayout: layout }), () => {
          const value = new Float64Array(O * H * W);
          const scale = new Float64Array(O * H * W);
          for (let o = 0; o < O; o++) {
            for (let y = 0; y < H; y++) {
              for (let x = 0; x < W; x++) {
                let s = 0;
                let t = 0;
                for (let c = 0; c < C; c++) {
                  for (let fy = 0; fy < 3; fy++) {
                    for (let fx = 0; fx < 3; fx++) {
                      const iy = y + fy - 1;
                      const ix = x + fx - 1;
                      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                      const v = at(c, iy, ix) * filter[((o * C + c) * 3 + fy) * 3 + fx];
                      s += v;
                      t += Math.abs(v);
                    }
                  }
                }
                const i = layout === 'nchw' ? (o * H + y) * W + x : (y * W + x) * O + o;
                value[i] = s;
                scale[i] = t;
              }
            }
          }
          return { value, scale };
        }, C * 9);
    }
    return out;
  });
}

const threaded = await serve(ROOT, 0, '127.0.0.1', { isolated: true });
const plain = await serve(ROOT, 0);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: CHROMIUM_ARGS, headless: true });
try {
  const page = async (server, threads) => harnessReady(await openPage(browser,
    `http://localhost:${server.address().port}/tests/browser/harness.html?backend=cpu&threads=${threads}`, `threads=${threads}`));
  const many = await runCases(await page(threaded, 3));
  const one = await runCases(await page(plain, 3));
  check(many.isolated && many.threads === 3, `an isolated page asking for 3 threads has ${many.threads} (isolated: ${many.isolated})`);
  check(!one.isolated && one.threads === 1, `a page without isolation has ${one.threads} thread (isolated: ${one.isolated})`);
  check(many.accelerated === false && one.accelerated === false, 'both contexts are CPU contexts (accelerated false)');
  for (const [name, r] of Object.entries(many.cases)) {
    const single = one.cases[name];
    check(r.length === r.expectedLength && r.worst === null, `${name}, 3 threads: ${r.length} values within the float64 tolerance${r.worst ? ` (${r.worst})` : ''}`);
    check(single.worst === null, `${name}, 1 thread: within the float64 tolerance${single.worst ? ` (${single.worst})` : ''}`);
    const same = r.bits.length === single.bits.length && r.bits.every((v, i) => v === single.bits[i]);
    check(same, `${name}: 3 threads and 1 thread agree bit for bit`);
  }
} finally {
  await browser.close();
  threaded.close();
  plain.close();
}
console.log(failures ? `cpu_threads: ${failures} failure(s)` : 'cpu_threads: ok');
process.exit(failures ? 1 : 0);
