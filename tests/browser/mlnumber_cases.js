// MLNumber values (WebIDL `bigint or unrestricted double`) cast to each data type by the spec's
// "cast" steps (/work/shared/webnn-spec/index.bs, "Casting"): ConvertToInt clamps to the type's
// range, then rounds to the nearest integer, ties to even, NaN becoming 0; ConvertToFloat rounds
// the exact value to the nearest float32/float16, ties to even, |x| at or past the midpoint to
// 2^128 (2^16 for float16) becoming an infinity, and a negative x that rounds to 0 giving -0.
// Each value goes through every place an MLNumber enters: constant(dataType, value),
// clamp({minValue: v, maxValue: v}) (whose output is then the cast value everywhere) and
// pad(..., {value: v}); the results are read back from the GPU. Driven by invalid_use.mjs.
//
// The spec's table casts uint32 as "signed", which contradicts its note (the result is
// representable in the type) and MLNumber's text (uint32 casts to unsigned long): the uint32
// rows clamp to 0 ..= 2^32 - 1.

const INT8 = [
  [2.5, 2], [3.5, 4], [-2.5, -2], [-3.5, -4], [1.4999999999999998, 1], [-0.5, 0], [-0, 0],
  [127.5, 127], [126.5, 126], [-128.7, -128], [300, 127], [-1e10, -128],
  [NaN, 0], [Infinity, 127], [-Infinity, -128], [2 ** 32 + 0.5, 127], [2 ** 53 + 2, 127],
  [5n, 5], [200n, 127], [-200n, -128],
];
const UINT8 = [
  [2.5, 2], [3.5, 4], [-0.5, 0], [-3.7, 0], [254.5, 254], [253.5, 254], [255.5, 255], [300, 255],
  [NaN, 0], [Infinity, 255], [-Infinity, 0], [2 ** 32, 255], [2 ** 53 + 2, 255],
  [255n, 255], [256n, 255], [-1n, 0],
];
const INT32 = [
  [2.5, 2], [3.5, 4], [-2.5, -2], [-3.5, -4], [2147483646.5, 2147483646], [2147483645.5, 2147483646],
  [2147483647.5, 2147483647], [-2147483648.5, -2147483648], [2 ** 31, 2147483647], [-(2 ** 31) - 1, -2147483648],
  [2 ** 32 + 0.5, 2147483647], [2 ** 53 + 2, 2147483647],
  [NaN, 0], [Infinity, 2147483647], [-Infinity, -2147483648],
  [123n, 123], [2n ** 31n, 2147483647], [-(2n ** 31n) - 1n, -2147483648], [2n ** 200n, 2147483647],
];
const UINT32 = [
  [2.5, 2], [3.5, 4], [-1, 0], [-0.5, 0], [4294967294.5, 4294967294], [4294967293.5, 4294967294],
  [4294967295.5, 4294967295], [2 ** 32, 4294967295], [2 ** 32 + 0.5, 4294967295], [2 ** 53 + 2, 4294967295],
  [NaN, 0], [Infinity, 4294967295], [-Infinity, 0],
  [4294967295n, 4294967295], [4294967296n, 4294967295], [-5n, 0],
];
const INT64_MAX = 9223372036854775807n;
const INT64_MIN = -9223372036854775808n;
const INT64 = [
  [2.5, 2n], [3.5, 4n], [-2.5, -2n], [-3.5, -4n], [2 ** 32 + 0.5, 4294967296n], [2 ** 32 + 1.5, 4294967298n],
  [-(2 ** 32) - 0.5, -4294967296n], [2 ** 53 + 2, 9007199254740994n], [2 ** 63, INT64_MAX], [-(2 ** 63), INT64_MIN],
  [1e19, INT64_MAX], [-1e19, INT64_MIN], [NaN, 0n], [Infinity, INT64_MAX], [-Infinity, INT64_MIN],
  [2n ** 62n + 1n, 4611686018427387905n], [2n ** 53n + 1n, 9007199254740993n], [INT64_MAX, INT64_MAX],
  [2n ** 63n, INT64_MAX], [INT64_MIN - 1n, INT64_MIN], [2n ** 200n, INT64_MAX], [-(2n ** 200n), INT64_MIN],
];
const UINT64_MAX = 18446744073709551615n;
const UINT64 = [
  [2.5, 2n], [3.5, 4n], [-1, 0n], [-0.5, 0n], [5e9, 5000000000n], [5e9 + 0.5, 5000000000n], [5e9 + 1.5, 5000000002n],
  [2 ** 53 + 2, 9007199254740994n], [2 ** 64, UINT64_MAX], [1e20, UINT64_MAX],
  [NaN, 0n], [Infinity, UINT64_MAX], [-Infinity, 0n],
  [UINT64_MAX, UINT64_MAX], [2n ** 64n, UINT64_MAX], [-1n, 0n], [2n ** 53n + 1n, 9007199254740993n],
  [2n ** 200n, UINT64_MAX], [-(2n ** 200n), 0n],
];
const F32_MAX = (2 ** 24 - 1) * 2 ** 104;
const FLOAT32 = [
  [0.1, 0.10000000149011612], [1 + 2 ** -24, 1], [1 + 3 * 2 ** -24, 1 + 2 ** -22], [1 + 2 ** -24 + 2 ** -52, 1 + 2 ** -23],
  [F32_MAX, F32_MAX], [2 ** 128 - 2 ** 103, Infinity], [2 ** 128 - 2 ** 103 - 2 ** 76, F32_MAX],
  [1e39, Infinity], [-1e39, -Infinity], [NaN, NaN], [Infinity, Infinity], [-Infinity, -Infinity],
  [-1e-50, -0], [1e-50, 0], [-0, -0], [2 ** -149, 2 ** -149], [2 ** -150, 0], [2 ** -150 + 2 ** -200, 2 ** -149],
  [16777217n, 16777216], [16777219n, 16777220],
  // 2^100 + 2^76 + 1 is just above a float32 midpoint; rounding it to a double first would
  // land on the midpoint and then round down to 2^100.
  [2n ** 100n + 2n ** 76n + 1n, 2 ** 100 + 2 ** 77],
  [2n ** 127n, 2 ** 127], [2n ** 128n - 2n ** 103n, Infinity], [2n ** 128n - 2n ** 103n - 1n, F32_MAX],
  [2n ** 200n, Infinity], [-(2n ** 200n), -Infinity],
];
// float16 results as binary16 bits.
const FLOAT16 = [
  [0.1, 0x2e66], [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02],
  // Just above a midpoint by less than float32 can hold: rounding through float32 gives 0x3c00.
  [1 + 2 ** -11 + 2 ** -40, 0x3c01],
  [65504, 0x7bff], [65519.99, 0x7bff], [65520, 0x7c00], [-65520, 0xfc00], [1e10, 0x7c00],
  [2 ** -24, 0x0001], [2 ** -25, 0x0000], [2 ** -25 + 2 ** -40, 0x0001], [2 ** -14 - 2 ** -26, 0x0400],
  [-1e-10, 0x8000], [-0, 0x8000], [NaN, 'NaN'], [Infinity, 0x7c00], [-Infinity, 0xfc00],
  [2049n, 0x6800], [2051n, 0x6802], [65519n, 0x7bff], [65520n, 0x7c00], [2n ** 200n, 0x7c00], [-(2n ** 200n), 0xfc00],
];

export const TABLE = {
  int8: INT8, uint8: UINT8, int32: INT32, uint32: UINT32, int64: INT64, uint64: UINT64,
  float32: FLOAT32, float16: FLOAT16,
};

const VIEWS = {
  int8: Int8Array, uint8: Uint8Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,
  uint64: BigUint64Array, float32: Float32Array, float16: Uint16Array,
};

const show = (v) => (typeof v === 'bigint' ? `${v}n` : Object.is(v, -0) ? '-0' : typeof v === 'number' && v !== 0 && Math.abs(v) < 1e-5 ? v.toExponential() : String(v));

function same(dataType, got, expected, path) {
  if (expected === 'NaN') return (got & 0x7c00) === 0x7c00 && (got & 0x3ff) !== 0;
  if (path === 'clamp' && dataType === 'float32') {
    // clamp computes in a shader, where WGSL lets a subnormal flush to zero (of either sign).
    if (expected !== 0 && Math.abs(expected) < 2 ** -126 && got === 0) return true;
    if (expected === 0) return got === 0;
  }
  return Object.is(got, expected);
}

async function read(context, graph, inputs, output) {
  const out = await context.createTensor({ dataType: output.dataType, shape: output.shape, readable: true });
  context.dispatch(graph, inputs, { y: out });
  const bytes = await context.readTensor(out);
  out.destroy();
  return new VIEWS[output.dataType](bytes);
}

/** Builds `build(builder)` as output y, computes it with `inputs` and compares y[0]. */
async function check(context, name, dataType, path, build, inputs, expected) {
  try {
    const b = new MLGraphBuilder(context);
    const y = build(b);
    const graph = await b.build({ y });
    const got = (await read(context, graph, inputs, y))[0];
    graph.destroy();
    const ok = same(dataType, got, expected, path);
    const fmt = (v) => (dataType === 'float16' && v !== 'NaN' ? `0x${v.toString(16).padStart(4, '0')}` : show(v));
    return { name, ok, message: ok ? fmt(got) : `got ${fmt(got)}, expected ${fmt(expected)}` };
  } catch (e) {
    return { name, ok: false, message: `${e?.name}: ${e?.message}` };
  }
}

/** Every case through each path: [{name, ok, message}]. */
export async function run() {
  const context = await navigator.ml.createContext();
  const limits = context.opSupportLimits();
  const results = [];
  try {
    for (const [dataType, rows] of Object.entries(TABLE)) {
      const View = VIEWS[dataType];
      const x = await context.createTensor({ dataType, shape: [1], writable: true });
      context.writeTensor(x, new View(1));
      const input = (b) => b.input('x', { dataType, shape: [1] });
      const paths = {
        'constant(dataType, value)': ['identity', (b, v) => b.identity(b.constant(dataType, v)), {}],
        clamp: ['clamp', (b, v) => b.clamp(input(b), { minValue: v, maxValue: v }), { x }],
        'pad value': ['pad', (b, v) => b.pad(input(b), [1], [0], { value: v }), { x }],
      };
      for (const [path, [op, build, inputs]] of Object.entries(paths)) {
        if (!limits[op]?.input?.dataTypes?.includes(dataType)) {
          results.push({ name: `${path} ${dataType}`, ok: false, message: `opSupportLimits().${op} does not list ${dataType}` });
          continue;
        }
        for (const [value, expected] of rows) {
          // A NaN bound of a float clamp is no bound (IEEE minNum/maxNum; see src/ops/activation.rs).
          if (path === 'clamp' && Number.isNaN(value)) continue;
          results.push(await check(context, `${path} ${dataType} ${show(value)}`, dataType, path, (b) => build(b, value), inputs, expected));
        }
      }
      x.destroy();
    }
    // WebIDL's ToNumeric: an object converts through valueOf, and a bigint it gives stays one.
    const objects = [
      ['uint64', { valueOf: () => 2n ** 60n + 1n }, 2n ** 60n + 1n, 'an object giving a bigint'],
      ['int32', { valueOf: () => 2.5 }, 2, 'an object giving 2.5'],
      ['int8', '3.5', 4, "'3.5'"],
    ];
    for (const [dataType, value, expected, what] of objects) {
      results.push(await check(context, `constant(${dataType}, ${what})`, dataType, 'constant',
        (b) => b.identity(b.constant(dataType, value)), {}, expected));
    }
  } finally {
    context.destroy();
  }
  return results;
}
