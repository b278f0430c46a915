// The browser half of tests/browser/idl.mjs, run in a page and in a SharedWorker: checks the
// interfaces that install() defined against a model of the WebIDL (built by idl.mjs from the
// specification's IDL blocks and tests/idl/extensions.idl), as WPT's idlharness.js does.
// Returns { counts, failures }; nothing here knows the members by name.

const TYPE_ERROR = 'TypeError';
const NOT_AN_ENUM_VALUE = 'not-an-enum-value';

// Whether `exposed` (an [Exposed] list) covers a global whose names are `scopes`.
function exposedIn(exposed, scopes) {
  return exposed.includes('*') || exposed.some((name) => scopes.includes(name));
}

function describe(value) {
  return value === undefined ? 'undefined' : JSON.stringify(value);
}

/**
 * One object of each interface, made through the API itself (an interface of the specification
 * without one here is a failure, so a new one cannot go unchecked). `other` is a second
 * MLGraphBuilder for calls; `data` the operands and tensors that arguments are made of.
 */
export async function makeInstances() {
  const context = await navigator.ml.createContext();
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [2] };
  const x = builder.input('x', desc);
  const graph = await builder.build({ y: builder.relu(x) });
  const tensor = await context.createTensor({ ...desc, readable: true, writable: true });
  const other = new MLGraphBuilder(context);
  // A safetensors file of one float32 tensor: u64 header length, JSON header, data.
  const header = new TextEncoder().encode('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}');
  const length = new Uint8Array(8);
  new DataView(length.buffer).setUint32(0, header.byteLength, true);
  const weightFile = await context.openWeights(new Blob([length, header, new Float32Array([1, 2])]));
  return {
    instances: {
      ML: navigator.ml,
      MLContext: context,
      MLGraphBuilder: other,
      MLOperand: x,
      MLGraph: graph,
      MLTensor: tensor,
      MLWeightFile: weightFile,
    },
    data: { context, graph, tensor, operand: other.input('a', desc) },
  };
}

// An argument of IDL type `type` (webidl2's string form) that the operation would accept, so that
// a call on a foreign `this` fails for its `this` alone.
function argumentFor(type, data) {
  if (type === 'MLOperand') return data.operand;
  if (type === 'sequence<MLOperand>') return [data.operand];
  if (type === 'MLTensor') return data.tensor;
  if (type === 'MLGraph') return data.graph;
  if (type === 'MLContext') return data.context;
  if (type === 'MLOperandDataType') return 'float32';
  if (type === 'MLOperandDescriptor') return { dataType: 'float32', shape: [2] };
  if (type === 'MLTensorDescriptor') return { dataType: 'float32', shape: [2], readable: true };
  if (type === 'AllowSharedBufferSource') return new Float32Array(2);
  if (/\bBlob\b/.test(type)) return new Blob([]);
  if (type === 'MLNamedOperands') return { y: data.operand };
  if (type === 'MLNamedTensors') return {};
  if (type === 'USVString' || type === 'DOMString') return 'w';
  if (/^sequence</.test(type)) return [1];
  if (/\b(long|short|byte|double|float|MLNumber)\b/.test(type)) return 1;
  return undefined;
}

// Calls `fn` on `self` with arguments made for `args`; for a promise type the call must not
// throw but return a promise rejected with a TypeError, otherwise it must throw a TypeError.
async function expectTypeError(fn, self, args, promise) {
  let result;
  try {
    result = fn.apply(self, args);
  } catch (e) {
    if (promise) return `threw ${e?.name} instead of returning a rejected promise`;
    return e?.name === TYPE_ERROR ? null : `threw ${e?.name}, not a TypeError`;
  }
  if (!promise) return 'did not throw';
  if (!(result instanceof Promise)) return 'did not return a promise';
  try {
    await result;
    return 'resolved';
  } catch (e) {
    return e?.name === TYPE_ERROR ? null : `rejected with ${e?.name}, not a TypeError`;
  }
}

// The members of dictionary `name` in the order WebIDL reads them: the inherited dictionary's
// first, each dictionary's own (partials included) in code-unit order of their names.
function dictionaryMembers(model, name) {
  const dictionary = model.dictionaries.find((d) => d.name === name);
  if (dictionary === undefined) return undefined;
  const inherited = dictionary.inheritance ? dictionaryMembers(model, dictionary.inheritance) : [];
  const own = [...dictionary.members].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return [...inherited, ...own];
}

function sameDescriptor(actual, expected) {
  return actual !== undefined && Object.entries(expected).every(([k, v]) => actual[k] === v);
}

/**
 * Checks every interface and mixin member of `model` exposed in a global named `scopes`
 * (['Window'], or ['Worker', 'SharedWorker'], ...) against globalThis, after install().
 */
export async function checkInterfaces(model, scopes) {
  const failures = [];
  const counts = { interfaces: 0, operations: 0, attributes: 0, mixinAttributes: 0, extensionMembers: 0, dictionaryArguments: 0, enumConversions: 0, instances: 0, assertions: 0 };
  const expect = (ok, what, message) => {
    counts.assertions++;
    if (!ok) failures.push(`${what}: ${message}`);
  };
  const { instances, data } = await makeInstances();
  const enumValues = (type) => model.enums.find((e) => e.name === type)?.values;
  const instanceList = Object.values(instances);

  // An object that implements none of `name`'s interfaces: a plain object and another interface's.
  const foreignThis = (name) => [{}, instanceList.find((o) => !(o instanceof globalThis[name]))];

  async function checkOperation(holder, owner, op, what) {
    const descriptor = Object.getOwnPropertyDescriptor(holder, op.name);
    expect(descriptor !== undefined, what, 'missing');
    if (descriptor === undefined) return;
    expect(sameDescriptor(descriptor, { writable: true, enumerable: true, configurable: true }), what,
      `descriptor ${describe({ ...descriptor, value: typeof descriptor.value })}, expected writable, enumerable, configurable`);
    const fn = descriptor.value;
    expect(typeof fn === 'function', what, 'not a function');
    if (typeof fn !== 'function') return;
    expect(fn.length === op.length, what, `length ${fn.length}, expected ${op.length}`);
    expect(fn.name === op.name, what, `name ${describe(fn.name)}`);
    if (op.static) return;
    const args = op.arguments.map((type) => argumentFor(type, data));
    for (const self of foreignThis(owner)) {
      const problem = await expectTypeError(fn, self, args, op.promise);
      expect(problem === null, what, `on a foreign this (${Object.prototype.toString.call(self)}): ${problem}`);
    }
  }

  // A proxy of dictionary `members` recording the members read: `bad` gets an invalid enum value,
  // required ones a valid value, the others undefined.
  function recordingDictionary(members, reads, bad) {
    return new Proxy({}, {
      get(target, key) {
        if (typeof key !== 'string') return undefined;
        reads.push(key);
        if (key === bad) return NOT_AN_ENUM_VALUE;
        const member = members.find((m) => m.name === key);
        return member?.required ? argumentFor(member.type, data) : undefined;
      },
    });
  }

  // Calls `op` on `instance` once per dictionary argument of each overload, that argument a
  // recording proxy: every member must be read exactly once, in WebIDL's order, and nothing
  // else. Then once per member of an enum type, given an invalid value: the conversion must
  // fail there with a TypeError, before the next member is read. An enum argument given an
  // invalid value must fail with a TypeError too.
  async function checkArgumentConversions(instance, op, what) {
    for (const overload of op.overloads) {
      for (const [index, type] of overload.entries()) {
        if (enumValues(type) !== undefined) {
          counts.enumConversions++;
          // An object whose string is the invalid value shows that the argument was converted;
          // where overloads differ in this argument, an object would pick another overload.
          const overloaded = op.overloads.length > 1;
          let converted = overloaded;
          const value = overloaded ? NOT_AN_ENUM_VALUE : { toString() { converted = true; return NOT_AN_ENUM_VALUE; } };
          const args = overload.map((t, i) => (i === index ? value : argumentFor(t, data)));
          const problem = await expectTypeError(instance[op.name], instance, args, op.promise);
          expect(problem === null && converted, `${what} argument ${index} (${type})`,
            `an invalid value: ${problem ?? 'not converted to a string'}`);
        }
        const members = dictionaryMembers(model, type);
        if (members === undefined) continue;
        counts.dictionaryArguments++;
        const reads = [];
        const args = overload.map((t, i) => (i === index ? recordingDictionary(members, reads) : argumentFor(t, data)));
        try {
          await instance[op.name](...args);
        } catch {
          // Only the reads matter: the made-up arguments may well be invalid.
        }
        const expected = members.map((m) => m.name);
        expect(JSON.stringify(reads) === JSON.stringify(expected), `${what} argument ${index} (${type})`,
          `read ${describe(reads)}, expected ${describe(expected)}`);
        for (const member of members) {
          if (enumValues(member.type) === undefined) continue;
          counts.enumConversions++;
          const badReads = [];
          const badArgs = overload.map((t, i) => (i === index ? recordingDictionary(members, badReads, member.name) : argumentFor(t, data)));
          const problem = await expectTypeError(instance[op.name], instance, badArgs, op.promise);
          expect(problem === null && badReads.at(-1) === member.name, `${what} argument ${index} (${type}.${member.name})`,
            `an invalid value: ${problem ?? `the conversion went on to read ${describe(badReads.slice(badReads.indexOf(member.name) + 1))}`}`);
        }
      }
    }
  }

  async function checkAttribute(holder, owner, attribute, what) {
    const descriptor = Object.getOwnPropertyDescriptor(holder, attribute.name);
    expect(descriptor !== undefined, what, 'missing');
    if (descriptor === undefined) return;
    expect(descriptor.enumerable === true && descriptor.configurable === true && !('value' in descriptor), what,
      'expected an enumerable, configurable accessor');
    const { get, set } = descriptor;
    expect(typeof get === 'function' && get.name === `get ${attribute.name}` && get.length === 0, what,
      `getter ${get?.name}/${get?.length}, expected "get ${attribute.name}" of length 0`);
    if (attribute.readonly) {
      expect(set === undefined, what, 'readonly, but has a setter');
    } else {
      expect(typeof set === 'function' && set.name === `set ${attribute.name}` && set.length === 1, what,
        `setter ${set?.name}/${set?.length}, expected "set ${attribute.name}" of length 1`);
    }
    if (typeof get !== 'function' || attribute.static) return;
    for (const self of foreignThis(owner)) {
      const problem = await expectTypeError(get, self, [], attribute.promise);
      expect(problem === null, what, `getter on a foreign this (${Object.prototype.toString.call(self)}): ${problem}`);
      if (typeof set === 'function') {
        const setProblem = await expectTypeError(set, self, [get.call(instances[owner])], false);
        expect(setProblem === null, what, `setter on a foreign this: ${setProblem}`);
      }
    }
  }

  for (const iface of model.interfaces) {
    if (!exposedIn(iface.exposed, scopes)) continue;
    const what = iface.name;
    counts.interfaces++;
    const global = Object.getOwnPropertyDescriptor(globalThis, iface.name);
    expect(sameDescriptor(global, { writable: true, enumerable: false, configurable: true }), what,
      'expected a writable, non-enumerable, configurable property of the global');
    const I = globalThis[iface.name];
    expect(typeof I === 'function', what, 'no interface object');
    if (typeof I !== 'function') continue;
    expect(I.name === iface.name, what, `name ${describe(I.name)}`);
    expect(Object.getPrototypeOf(I) === (iface.inheritance ? globalThis[iface.inheritance] : Function.prototype), what,
      'wrong [[Prototype]] of the interface object');
    const length = iface.constructors.length === 0 ? 0 : Math.min(...iface.constructors);
    expect(I.length === length, what, `length ${I.length}, expected ${length}`);
    let callError = null;
    try { I(); } catch (e) { callError = e; }
    expect(callError?.name === TYPE_ERROR, what, 'calling the interface object did not throw a TypeError');
    if (iface.constructors.length === 0) {
      let newError = null;
      try { new I(); } catch (e) { newError = e; }
      expect(newError?.name === TYPE_ERROR, what, 'has no constructor, but new did not throw a TypeError');
    }
    const proto = I.prototype;
    expect(sameDescriptor(Object.getOwnPropertyDescriptor(I, 'prototype'), { writable: false, enumerable: false, configurable: false }), what,
      'prototype property must be non-writable, non-enumerable, non-configurable');
    expect(Object.getPrototypeOf(proto) === (iface.inheritance ? globalThis[iface.inheritance].prototype : Object.prototype), what,
      'wrong [[Prototype]] of the interface prototype object');
    expect(sameDescriptor(Object.getOwnPropertyDescriptor(proto, 'constructor'), { value: I, writable: true, enumerable: false, configurable: true }), what,
      'prototype.constructor');
    expect(sameDescriptor(Object.getOwnPropertyDescriptor(proto, Symbol.toStringTag), { value: iface.name, writable: false, enumerable: false, configurable: true }), what,
      'Symbol.toStringTag must be the name, non-writable, non-enumerable, configurable');

    const known = new Set(['constructor']);
    for (const op of iface.operations) {
      known.add(op.name);
      await checkOperation(op.static ? I : proto, iface.name, op, `${iface.name}.${op.static ? '' : 'prototype.'}${op.name}()`);
      counts.operations++;
      if (op.extension) counts.extensionMembers++;
    }
    for (const attribute of iface.attributes) {
      known.add(attribute.name);
      await checkAttribute(attribute.static ? I : proto, iface.name, attribute, `${iface.name}.${attribute.static ? '' : 'prototype.'}${attribute.name}`);
      counts.attributes++;
      if (attribute.extension) counts.extensionMembers++;
    }
    for (const key of Reflect.ownKeys(proto)) {
      if (key === Symbol.toStringTag) continue;
      expect(known.has(key), what, `prototype member ${String(key)} is in neither the specification's IDL nor tests/idl/extensions.idl`);
    }

    const instance = instances[iface.name];
    if (instance === undefined) {
      expect(iface.extension, what, 'no instance to check (add one to makeInstances in tests/browser/idl_check.js)');
      continue;
    }
    counts.instances++;
    expect(Object.getPrototypeOf(instance) === proto, what, 'an instance\'s [[Prototype]] is not the interface prototype object');
    expect(Object.prototype.toString.call(instance) === `[object ${iface.name}]`, what, `class string ${Object.prototype.toString.call(instance)}`);
    expect(Reflect.ownKeys(instance).length === 0, what, `an instance has own properties: ${Reflect.ownKeys(instance).map(String)}`);
    for (const op of iface.operations) {
      if (!op.static) await checkArgumentConversions(instance, op, `${iface.name}.prototype.${op.name}()`);
    }
    for (const attribute of iface.attributes) {
      if (attribute.static) continue;
      let value;
      let error = null;
      try { value = instance[attribute.name]; } catch (e) { error = e; }
      expect(error === null, `${iface.name}.prototype.${attribute.name}`, `throws on an instance: ${error}`);
      if (attribute.promise) expect(value instanceof Promise, `${iface.name}.prototype.${attribute.name}`, 'not a promise');
      if (attribute.sameObject) expect(instance[attribute.name] === value, `${iface.name}.prototype.${attribute.name}`, '[SameObject], but a new object each time');
      if (!attribute.readonly && enumValues(attribute.type) !== undefined) {
        // WebIDL ignores an assignment of a value outside the enum.
        counts.enumConversions++;
        let problem = null;
        try {
          instance[attribute.name] = NOT_AN_ENUM_VALUE;
          if (instance[attribute.name] !== value) problem = `the value changed to ${describe(instance[attribute.name])}`;
        } catch (e) {
          problem = `threw ${e?.name}`;
        }
        expect(problem === null, `${iface.name}.prototype.${attribute.name}`, `assigning an invalid value: ${problem}`);
      }
    }
  }

  // Mixins: members on the prototype of each interface that includes them, where that interface
  // is in this global (Navigator in a Window, WorkerNavigator in a worker).
  for (const { target, mixin } of model.includes) {
    const I = globalThis[target];
    if (typeof I !== 'function') continue;
    const m = model.mixins.find((x) => x.name === mixin);
    expect(m !== undefined, `${target} includes ${mixin}`, 'no such mixin');
    if (m === undefined) continue;
    const self = target === Object.getPrototypeOf(navigator)?.constructor?.name ? navigator : undefined;
    for (const attribute of m.attributes) {
      const what = `${target}.prototype.${attribute.name} (${mixin})`;
      counts.mixinAttributes++;
      const descriptor = Object.getOwnPropertyDescriptor(I.prototype, attribute.name);
      expect(descriptor !== undefined, what, 'missing');
      if (descriptor === undefined) continue;
      expect(descriptor.enumerable === true && descriptor.configurable === true && typeof descriptor.get === 'function', what,
        'expected an enumerable, configurable accessor');
      expect(descriptor.get?.name === `get ${attribute.name}` && descriptor.get?.length === 0, what, `getter ${descriptor.get?.name}`);
      expect(attribute.readonly ? descriptor.set === undefined : typeof descriptor.set === 'function', what, 'setter');
      if (typeof descriptor.get !== 'function') continue;
      const problem = await expectTypeError(descriptor.get, {}, [], attribute.promise);
      expect(problem === null, what, `getter on a foreign this: ${problem}`);
      expect(self !== undefined, what, 'navigator is not an instance of the interface');
      if (self === undefined) continue;
      expect(!Object.hasOwn(self, attribute.name), what, 'an own property of navigator shadows the accessor');
      const value = self[attribute.name];
      if (attribute.sameObject) expect(value !== undefined && self[attribute.name] === value, what, '[SameObject], but a new object each time');
      const type = globalThis[attribute.type];
      if (typeof type === 'function') expect(value instanceof type, what, `not an ${attribute.type}`);
    }
    if (m.operations.length > 0) expect(false, `${target} includes ${mixin}`, 'mixin operations are not checked yet');
  }
  return { counts, failures };
}

/**
 * What remains of the model in a non-secure context after install(): nothing [SecureContext]
 * may be exposed.
 */
export function checkInsecure(model, installed) {
  const failures = [];
  let checked = 0;
  if (globalThis.isSecureContext !== false) failures.push('the page is a secure context: the check means nothing');
  if (installed !== false) failures.push(`install() returned ${installed}, expected false`);
  for (const iface of model.interfaces) {
    if (!iface.secureContext) continue;
    checked++;
    if (iface.name in globalThis) failures.push(`${iface.name} is exposed in a non-secure context`);
  }
  for (const { target, mixin } of model.includes) {
    for (const attribute of model.mixins.find((x) => x.name === mixin)?.attributes ?? []) {
      if (!attribute.secureContext || typeof globalThis[target] !== 'function') continue;
      checked++;
      if (attribute.name in globalThis[target].prototype) failures.push(`${target}.prototype.${attribute.name} is exposed in a non-secure context`);
    }
  }
  return { checked, failures };
}

/** relu(x - 0.5) for x = [1, -2, 3, -4]: exactly [0.5, 0, 2.5, 0]. */
export async function computeSmallGraph() {
  const context = await navigator.ml.createContext();
  const builder = new MLGraphBuilder(context);
  const desc = { dataType: 'float32', shape: [4] };
  const x = builder.input('x', desc);
  const y = builder.relu(builder.sub(x, builder.constant(desc, new Float32Array([0.5, 0.5, 0.5, 0.5]))));
  const graph = await builder.build({ y });
  const input = await context.createTensor({ ...desc, writable: true });
  const output = await context.createTensor({ ...desc, readable: true });
  context.writeTensor(input, new Float32Array([1, -2, 3, -4]));
  context.dispatch(graph, { x: input }, { y: output });
  const result = Array.from(new Float32Array(await context.readTensor(output)));
  context.destroy();
  return result;
}
