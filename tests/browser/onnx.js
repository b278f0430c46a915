// A minimal ONNX writer for the kernel benchmark (bench/kernels.mjs): the few
// protobuf messages of onnx.proto a float32 graph of standard ops (with 8-bit constants) needs, so the benchmark builds
// its models in the page rather than downloading or committing any.

// TensorProto.DataType of each typed array.
const FLOAT = 1;
const TYPES = { Float32Array: FLOAT, Uint8Array: 2, Int8Array: 3 };
const ATTR_FLOAT = 1; // AttributeProto.AttributeType.FLOAT
const ATTR_INT = 2; // AttributeProto.AttributeType.INT
const ATTR_INTS = 7; // AttributeProto.AttributeType.INTS

// Protobuf wire format: a field is a varint key (number << 3 | wire type) and its value;
// wire type 0 is a varint, 2 length-delimited bytes, 5 a little-endian 32-bit value.
class Writer {
  constructor() { this.parts = []; }
  varint(v) {
    const out = [];
    let n = BigInt(v);
    if (n < 0n) n += 1n << 64n; // negative int64: two's complement in 10 bytes
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n) b |= 0x80;
      out.push(b);
    } while (n);
    this.parts.push(Uint8Array.from(out));
    return this;
  }
  key(field, wire) { return this.varint((field << 3) | wire); }
  int(field, v) { return this.key(field, 0).varint(v); }
  bytes(field, u8) { this.key(field, 2).varint(u8.length); this.parts.push(u8); return this; }
  string(field, s) { return this.bytes(field, new TextEncoder().encode(s)); }
  message(field, w) { return this.bytes(field, w.finish()); }
  float(field, v) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.key(field, 5).parts.push(b);
    return this;
  }
  finish() {
    const out = new Uint8Array(this.parts.reduce((s, p) => s + p.length, 0));
    let o = 0;
    for (const p of this.parts) { out.set(p, o); o += p.length; }
    return out;
  }
}

// TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9 (little-endian values).
function tensor(name, dims, data) {
  const w = new Writer();
  for (const d of dims) w.int(1, d);
  w.int(2, TYPES[data.constructor.name]).string(8, name);
  return w.bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

// ValueInfoProto { name = 1, type = 2 { tensor_type = 1 { elem_type = 1, shape = 2 { dim = 1 { dim_value = 1 } } } } }
function valueInfo(name, dims) {
  const shape = new Writer();
  for (const d of dims) shape.message(1, new Writer().int(1, d));
  const tensorType = new Writer().int(1, FLOAT).message(2, shape);
  return new Writer().string(1, name).message(2, new Writer().message(1, tensorType));
}

// NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5
// { name = 1, f = 2, i = 3, ints = 8, type = 20 }.
function node(op, inputs, outputs, attributes = {}) {
  const w = new Writer();
  inputs.forEach((i) => w.string(1, i));
  outputs.forEach((o) => w.string(2, o));
  w.string(3, `${op}_${outputs[0]}`).string(4, op);
  for (const [name, v] of Object.entries(attributes)) {
    const a = new Writer().string(1, name);
    if (Array.isArray(v)) {
      v.forEach((x) => a.int(8, x));
      a.int(20, ATTR_INTS);
    } else if (Number.isInteger(v)) a.int(3, v).int(20, ATTR_INT);
    else a.float(2, v).int(20, ATTR_FLOAT);
    w.message(5, a);
  }
  return w;
}

/**
 * Serializes a model. `graph` = { inputs: [[name, dims]], outputs: [[name, dims]],
 * initializers: [[name, dims, Float32Array, Int8Array or Uint8Array]], nodes: [[op, inputs, outputs,
 * attributes?]] }.
 * ModelProto: ir_version = 1, producer_name = 2, graph = 7, opset_import = 8 { version = 2 };
 * GraphProto: node = 1, name = 2, initializer = 5, input = 11, output = 12.
 */
export function onnxModel(graph, opset = 17) {
  const g = new Writer();
  for (const n of graph.nodes) g.message(1, node(...n));
  g.string(2, 'bench');
  for (const [name, dims, data] of graph.initializers) g.message(5, tensor(name, dims, data));
  for (const [name, dims] of graph.inputs) g.message(11, valueInfo(name, dims));
  for (const [name, dims] of graph.outputs) g.message(12, valueInfo(name, dims));
  return new Writer().int(1, 8).string(2, 'webnn-wgpu bench').message(7, g)
    .message(8, new Writer().string(1, '').int(2, opset)).finish();
}
