// The WGSL lab in the browser: the kernel texts that `examples/wgsl_lab.rs write` generated from
// our matmul and GEMV lowering (several tile shapes per product), each timed on the page's own
// GPUDevice as kernels_page.js times its cells (warm-up, repeated runs ending with one read back)
// and checked against its float64 reference. `wgsl_lab run` times the same texts natively, so a
// kernel's browser-to-native ratio comes from one text through two compilers (Tint, naga).
import { SHAPES, data, check, measure, halfValue } from './kernels_page.js';

/** Times every kernel of the lab file at `path` (of the shapes in `opts.labShapes`, when given); resolves to [{ shape, variant, ms, check } | { error }]. */
export async function run(path, opts, log) {
  const only = opts.labShapes?.length ? new Set(opts.labShapes) : null;
  const list = (await (await fetch(path)).json()).filter((e) => !only || only.has(e.shape));
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({
    requiredLimits: {
      maxBufferSize: adapter.limits.maxBufferSize,
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
    },
  });
  const results = [];
  try {
    for (const e of list) {
      const r = { shape: e.shape, variant: e.variant };
      try {
        Object.assign(r, await one(device, e, opts));
      } catch (err) {
        r.error = `${err?.name ?? 'Error'}: ${err?.message ?? err}`;
      }
      results.push(r);
      await log?.(`lab ${JSON.stringify(r)}`);
    }
  } finally {
    device.destroy();
  }
  return results;
}

/** A probe's check (examples/wgsl_lab.rs): every element `expect`, or on 66 elements the
 * product over every `kStride`-th k or K/kTile times the one over the first kTile; undefined
 * for a whole product. */
function probeCheck(e, d, out) {
  if (e.expect !== undefined) {
    let wrong = 0;
    for (let i = 0; i < e.M * e.N; i++) if (out[i] !== e.expect) wrong++;
    return { ok: wrong === 0 && out.length >= e.M * e.N, checked: e.M * e.N, worst: wrong };
  }
  if (!e.kStride && !e.kTile) return undefined;
  // kTile t: K/t times the product over the first t k.
  const [depth, times, stride] = e.kTile ? [e.kTile, e.K / e.kTile, 1] : [e.K, 1, e.kStride];
  let worst = 0;
  const picks = [[0, 0], [e.M - 1, e.N - 1]];
  for (let p = 2; p < 66; p++) picks.push([(p * 7919) % e.M, (p * 104729) % e.N]);
  for (const [i, j] of picks) {
    let ref = 0;
    let mag = 0;
    for (let k = 0; k < depth; k += stride) {
      const v = times * d.A[i * e.K + k] * d.B[k * e.N + j];
      ref += v;
      mag += Math.abs(v);
    }
    const err = Math.abs(out[i * e.N + j] - ref) / (1e-4 * mag + 1e-6);
    worst = Math.max(worst, Number.isNaN(err) ? Infinity : err);
  }
  return { ok: worst <= 1, checked: picks.length, worst };
}

async function one(device, e, opts) {
  if (!SHAPES[e.shape]) throw new Error(`no shape ${e.shape} in kernels_page.js`);
  const d = data(e.shape);
  const half = e.dataType === 'float16';
  const U = GPUBufferUsage;
  const buffer = (size, values) => {
    const b = device.createBuffer({ size: Math.max(4, Math.ceil(size / 4) * 4), usage: U.STORAGE | U.COPY_DST | U.COPY_SRC });
    if (values) device.queue.writeBuffer(b, 0, values);
    return b;
  };
  const outBytes = Math.ceil((e.M * e.N * (half ? 2 : 4)) / 4) * 4;
  const buffers = {
    in0: buffer((half ? d.Ah : d.A).byteLength, half ? d.Ah : d.A),
    in1: buffer((half ? d.Bh : d.B).byteLength, half ? d.Bh : d.B),
    out0: buffer(outBytes),
  };
  e.scratch.forEach((size, i) => { buffers[`s${i}`] = buffer(size); });
  const readback = device.createBuffer({ size: outBytes, usage: U.MAP_READ | U.COPY_DST });
  const max = device.limits.maxComputeWorkgroupsPerDimension;
  device.pushErrorScope('validation');
  const steps = e.launches.map((l) => {
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: l.wgsl }), entryPoint: 'main' } });
    const bindGroup = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: l.bind.map((name, binding) => ({ binding, resource: { buffer: buffers[name] } })),
    });
    const x = Math.min(l.groups, max);
    return { pipeline, bindGroup, grid: [x, Math.ceil(l.groups / x)] };
  });
  const invalid = await device.popErrorScope();
  if (invalid) throw new Error(invalid.message);
  const step = () => {
    const enc = device.createCommandEncoder();
    for (const s of steps) {
      const pass = enc.beginComputePass();
      pass.setPipeline(s.pipeline);
      pass.setBindGroup(0, s.bindGroup);
      pass.dispatchWorkgroups(...s.grid);
      pass.end();
    }
    device.queue.submit([enc.finish()]);
  };
  const finish = async () => {
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(buffers.out0, 0, readback, 0, outBytes);
    device.queue.submit([enc.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const bytes = readback.getMappedRange().slice(0);
    readback.unmap();
    return bytes;
  };
  const values = (bytes) => (half ? Float32Array.from(new Uint16Array(bytes, 0, e.M * e.N), halfValue) : new Float32Array(bytes));
  try {
    const r = await measure(step, finish, opts, values);
    const result = { ms: r.ms, slopeMs: r.slopeMs, iters: r.iters, window: r.window, check: probeCheck(e, d, r.out) ?? check(e.shape, r.out) };
    return e.flops ? { ...result, flops: e.flops } : result;
  } finally {
    Object.values(buffers).forEach((b) => b.destroy());
    readback.destroy();
  }
}
