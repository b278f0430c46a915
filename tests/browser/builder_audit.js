// Every MLGraphBuilder method, enumerated from MLGraphBuilder.prototype so that a new method is
// covered without a change here, called with systematic bad arguments: no arguments, each bad
// value alone, after 0-d and other operands, in every position the method's arity gives, and
// options with each known member set to each bad value. Every call must return or throw (reject,
// for build) a TypeError or a DOMException; a TypeError the implementation caused itself (reading
// a property of undefined, calling a non-function) does not count. The outputs of calls that
// succeeded on a 0-d operand are then built into one graph per method, which must resolve or
// reject with a DOMException or TypeError. Driven by tests/browser/invalid_use.mjs, which also
// watches for wasm traps and uncaught errors.

const TYPES = ['float32', 'float16', 'int32', 'uint32', 'int64', 'uint64', 'int8', 'uint8'];
const BAD = [
  undefined, null, NaN, -1, 0, 1.5, 2 ** 32, 1e300, -Infinity, '', 'abc', true, {}, [], [-1], [NaN],
  [2 ** 32], [2 ** 31 - 1, 2 ** 31 - 1], [2 ** 20, 2 ** 20, 2 ** 20], new Array(300).fill(1), Symbol('s'), 1n,
  () => 0, new Float32Array(2), { length: 2 }, [undefined], [{}],
];
// Fewer values for options: every member name times each of these.
const BAD_OPTION_VALUES = [null, NaN, -1, 2 ** 32, 'abc', {}, [], [-1], [2 ** 31 - 1, 2 ** 31 - 1], Symbol('s'), 1n, [{}]];
// Every member of every options dictionary of the spec, and a few that belong to none.
const OPTION_KEYS = [
  'label', 'axes', 'axis', 'keepDimensions', 'padding', 'strides', 'dilations', 'groups', 'inputLayout',
  'filterLayout', 'layout', 'windowDimensions', 'outputShapeRounding', 'outputSizes', 'outputPadding', 'bias',
  'scale', 'epsilon', 'alpha', 'beta', 'minValue', 'maxValue', 'mode', 'value', 'permutation', 'aTranspose',
  'bTranspose', 'c', 'sizes', 'scales', 'exclusive', 'reversed', 'upper', 'diagonal', 'outputDataType',
  'recurrentBias', 'initialHiddenState', 'initialCellState', 'peepholeWeight', 'direction', 'activations',
  'returnSequence', 'resetAfter', 'roundingType', 'keepDims', 'weightLayout',
];

const isInternal = (e) => /Cannot read properties of|is not a function|is not a constructor|undefined is not|null is not/.test(e?.message ?? '');

function classify(e) {
  if (e instanceof DOMException) return 'DOMException';
  if (e instanceof TypeError && !isInternal(e)) return 'TypeError';
  return `BAD ${e?.constructor?.name ?? typeof e}: ${e?.message ?? String(e)}`;
}

function show(args) {
  try {
    return JSON.stringify(args, (k, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'symbol' ? String(v)
      : typeof v === 'function' ? 'function' : v instanceof MLOperand ? `${v.dataType}[${v.shape}]` : v)).slice(0, 200);
  } catch {
    return '(unprintable)';
  }
}

/** The builder methods: own function-valued data properties of the prototype. */
export function methods() {
  return Object.getOwnPropertyNames(MLGraphBuilder.prototype).filter((name) => {
    const d = Object.getOwnPropertyDescriptor(MLGraphBuilder.prototype, name);
    return name !== 'constructor' && typeof d.value === 'function';
  });
}

/** Operands of `b`: 0-d of every type, small ones of a few ranks, a large one. */
function pool(b) {
  const operands = TYPES.map((dataType) => b.input(`scalar_${dataType}`, { dataType, shape: [] }));
  operands.push(
    b.input('v', { dataType: 'float32', shape: [4] }),
    b.input('m', { dataType: 'float32', shape: [2, 3] }),
    b.input('t', { dataType: 'float32', shape: [1, 2, 3, 3] }),
    b.input('i', { dataType: 'int32', shape: [2] }),
    b.input('l', { dataType: 'int64', shape: [2, 1] }),
    b.input('h', { dataType: 'float16', shape: [2, 2] }),
    b.input('big', { dataType: 'uint8', shape: [2 ** 14, 2 ** 14] }),
    b.constant('float32', 1),
  );
  return operands;
}

/** Runs the audit; returns {calls, counts, failures}. */
export async function run() {
  const context = await navigator.ml.createContext();
  const counts = {};
  const failures = [];
  let calls = 0;
  const note = (outcome, name, args) => {
    counts[outcome.startsWith('BAD') ? 'BAD' : outcome] = (counts[outcome.startsWith('BAD') ? 'BAD' : outcome] ?? 0) + 1;
    if (outcome.startsWith('BAD') && failures.length < 40) failures.push(`${name}(${show(args)}): ${outcome}`);
  };
  try {
    const foreign = new MLGraphBuilder(context).input('foreign', { dataType: 'float32', shape: [2] });
    for (const name of methods()) {
      const b = new MLGraphBuilder(context);
      const operands = pool(b);
      const scalars = operands.slice(0, TYPES.length);
      const values = [...BAD, foreign, ...operands];
      const argLists = [[]];
      for (const v of values) argLists.push([v]);
      for (const p of [...operands, foreign]) {
        for (const v of values) argLists.push([p, v], [p, p, v], [p, v, v]);
      }
      // Each position of the method's arity given an operand, a list, a number or a list of
      // operands, then options with each member bad.
      const arity = Math.max(1, MLGraphBuilder.prototype[name].length);
      for (const p of [scalars[0], operands[TYPES.length + 2], operands[TYPES.length + 3]]) {
        const kinds = [p, [0, 1], 1, [p, p]];
        let prefixes = [[p]];
        for (let i = 1; i < arity; i++) prefixes = prefixes.flatMap((prefix) => kinds.map((k) => [...prefix, k]));
        for (const prefix of prefixes) {
          argLists.push(prefix, [...prefix, {}]);
        }
        const base = Array.from({ length: arity }, () => p);
        for (const key of OPTION_KEYS) {
          for (const v of BAD_OPTION_VALUES) argLists.push([...base, { [key]: v }]);
          argLists.push([...base, { [key]: foreign }]);
        }
      }
      const built = [];
      for (const args of argLists) {
        calls++;
        let result;
        try {
          result = b[name](...args);
        } catch (e) {
          note(classify(e), name, args);
          continue;
        }
        if (result instanceof Promise) {
          try {
            await result;
            note('resolved', name, args);
          } catch (e) {
            note(classify(e), name, args);
          }
          continue;
        }
        note('returned', name, args);
        const outputs = [result].flat().filter((o) => o instanceof MLOperand);
        if (built.length < 4 && args.some((a) => scalars.includes(a))) built.push(...outputs);
      }
      const named = Object.fromEntries(built.map((o, i) => [`y${i}`, o]));
      if (built.length > 0 && name !== 'build') {
        calls++;
        try {
          const graph = await b.build(named);
          graph.destroy();
          note('built', `${name} outputs: build`, []);
        } catch (e) {
          note(classify(e), `${name} outputs: build`, built.map((o) => o));
        }
      }
    }
  } finally {
    context.destroy();
  }
  return { calls, counts, failures };
}
