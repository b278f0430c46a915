// The demo's model: a tiny two-layer perceptron with fixed weights and a fixed batch of inputs,
// softmax(relu(x·W1 + b1)·W2 + b2), plus its float64 reference. Pure data and math: the page
// (index.js) and the browser test (tests/browser/demo.mjs) both import it.

export const BATCH = 4;
export const IN = 4;
export const HIDDEN = 8;
export const OUT = 3;

// Deterministic values in [-1, 1) without a random generator.
const wave = (n, phase, scale) => Float32Array.from({ length: n }, (_, i) => Math.fround(scale * Math.sin(1.7 * i + phase)));

export const x = wave(BATCH * IN, 0.3, 1.0);
export const w1 = wave(IN * HIDDEN, 1.1, 0.8);
export const b1 = wave(HIDDEN, 2.3, 0.1);
export const w2 = wave(HIDDEN * OUT, 0.7, 0.9);
export const b2 = wave(OUT, 1.9, 0.1);

/** Row-major [m, k] · [k, n] + bias[n] in float64. */
function dense(a, m, k, w, n, bias) {
  const out = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = bias[j];
      for (let p = 0; p < k; p++) s += a[i * k + p] * w[p * n + j];
      out[i * n + j] = s;
    }
  }
  return out;
}

/** The float64 reference output, [BATCH, OUT] row-major. */
export function reference() {
  const h = dense(x, BATCH, IN, w1, HIDDEN, b1).map((v) => Math.max(v, 0));
  const logits = dense(h, BATCH, HIDDEN, w2, OUT, b2);
  const out = new Float64Array(BATCH * OUT);
  for (let i = 0; i < BATCH; i++) {
    const row = logits.subarray(i * OUT, (i + 1) * OUT);
    const max = Math.max(...row);
    const e = row.map((v) => Math.exp(v - max));
    const sum = e.reduce((a, b) => a + b, 0);
    for (let j = 0; j < OUT; j++) out[i * OUT + j] = e[j] / sum;
  }
  return out;
}

/** Builds the graph with a WebNN MLGraphBuilder; returns the output operand. */
export function buildGraph(builder) {
  const f32 = (shape) => ({ dataType: 'float32', shape });
  const input = builder.input('x', f32([BATCH, IN]));
  const hidden = builder.relu(builder.add(builder.matmul(input, builder.constant(f32([IN, HIDDEN]), w1)), builder.constant(f32([HIDDEN]), b1)));
  const logits = builder.add(builder.matmul(hidden, builder.constant(f32([HIDDEN, OUT]), w2)), builder.constant(f32([OUT]), b2));
  return builder.softmax(logits, 1);
}
