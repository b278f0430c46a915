// Many dispatches in flight across graphs and tensors, chained (the output of one is the input
// of the next) with no await in between, interleaved with writes and reads: every read must see
// the state after exactly the work issued before it (the spec's MLContext timeline). Runs in a
// page (tests/browser/harness.html) and in a dedicated module Worker
// (tests/browser/concurrency_worker.js); driven by tests/browser/concurrency.mjs.

const N = 64;

/** A small seeded generator (xorshift32) so a failure can be replayed. */
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

/**
 * Runs `steps` random operations over `tensorCount` tensors and four graphs on one context,
 * then a second context's chain at the same time; returns { ok, reads, dispatches, message }.
 */
export async function run({ seed = 1, steps = 300, tensorCount = 6 } = {}) {
  const random = rng(seed);
  const pick = (n) => Math.floor(random() * n);
  const ctx = await navigator.ml.createContext();
  const desc = { dataType: 'float32', shape: [N] };
  // Integer-valued float32 arithmetic whose magnitude stays small: results are exact.
  const graphs = [];
  const specs = [
    { name: 'inc', inputs: 1, build: (b, [x]) => b.add(x, b.constant(desc, new Float32Array(N).fill(1))), ref: ([x]) => x + 1 },
    { name: 'neg', inputs: 1, build: (b, [x]) => b.neg(x), ref: ([x]) => -x },
    { name: 'max', inputs: 2, build: (b, [x, y]) => b.max(x, y), ref: ([x, y]) => Math.max(x, y) },
    { name: 'min', inputs: 2, build: (b, [x, y]) => b.min(x, y), ref: ([x, y]) => Math.min(x, y) },
  ];
  for (const spec of specs) {
    const b = new MLGraphBuilder(ctx);
    const ins = Array.from({ length: spec.inputs }, (_, i) => b.input(`in${i}`, desc));
    graphs.push({ ...spec, graph: await b.build({ out: spec.build(b, ins) }) });
  }
  const tensors = [];
  const model = [];
  for (let t = 0; t < tensorCount; t++) {
    tensors.push(await ctx.createTensor({ ...desc, readable: true, writable: true }));
    const init = Float32Array.from({ length: N }, (_, i) => ((i * 7 + t * 13) % 23) - 11);
    ctx.writeTensor(tensors[t], init);
    model.push(Array.from(init));
  }
  const reads = [];
  let dispatches = 0;
  for (let s = 0; s < steps; s++) {
    const r = random();
    if (r < 0.08) {
      const t = pick(tensorCount);
      const data = Float32Array.from({ length: N }, () => pick(41) - 20);
      ctx.writeTensor(tensors[t], data);
      model[t] = Array.from(data);
    } else if (r < 0.2) {
      const t = pick(tensorCount);
      reads.push({ step: s, tensor: t, expected: model[t].slice(), promise: ctx.readTensor(tensors[t]) });
    } else {
      const g = graphs[pick(graphs.length)];
      const order = Array.from({ length: tensorCount }, (_, i) => i).sort(() => random() - 0.5);
      const ins = order.slice(0, g.inputs);
      const out = order[g.inputs];
      const inputs = Object.fromEntries(ins.map((t, i) => [`in${i}`, tensors[t]]));
      ctx.dispatch(g.graph, inputs, { out: tensors[out] });
      model[out] = model[ins[0]].map((_, i) => g.ref(ins.map((t) => model[t][i])));
      dispatches++;
    }
  }
  for (let t = 0; t < tensorCount; t++) {
    reads.push({ step: steps, tensor: t, expected: model[t].slice(), promise: ctx.readTensor(tensors[t]) });
  }
  let message = '';
  for (const read of reads) {
    const got = Array.from(new Float32Array(await read.promise));
    const bad = got.findIndex((v, i) => v !== read.expected[i]);
    if (bad >= 0 && !message) {
      message = `seed ${seed}: the read of tensor ${read.tensor} issued at step ${read.step} has ${got[bad]} at ${bad}, expected ${read.expected[bad]}`;
    }
  }
  for (const t of tensors) t.destroy();
  for (const g of graphs) g.graph.destroy();
  ctx.destroy();
  return { ok: message === '', reads: reads.length, dispatches, message };
}

/** `contexts` runs at once on separate contexts, each with its own seed. */
export async function runMany({ seed = 1, contexts = 3, steps = 300 } = {}) {
  const results = await Promise.all(Array.from({ length: contexts }, (_, i) => run({ seed: seed + i, steps })));
  return {
    ok: results.every((r) => r.ok),
    reads: results.reduce((n, r) => n + r.reads, 0),
    dispatches: results.reduce((n, r) => n + r.dispatches, 0),
    message: results.map((r) => r.message).filter(Boolean).join('; '),
  };
}
