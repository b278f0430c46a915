//! The bit-exact harness of the data-movement tests: graphs of movement operators over random bit
//! patterns (NaNs with payloads, signaling NaNs, signed zeros, subnormals included), checked
//! against the float64 reference run on "position" tensors — each moved input element replaced by
//! its index in a pool of all input elements — which says where every output element comes from.

use super::*;
use webnn_wgpu::graph::{DataType, GraphBuilder, Operand, OperandDescriptor};
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::backend::webgpu::{Context, Tensor, TensorDescriptor};
use webnn_wgpu::{Error, Result};

pub const TYPES: [DataType; 6] = [
    DataType::Float32,
    DataType::Float16,
    DataType::Int32,
    DataType::Uint32,
    DataType::Int8,
    DataType::Uint8,
];

/// A value of a test graph: a graph input, or output `1` of node `0`.
#[derive(Clone, Copy)]
pub enum Val {
    Input(usize),
    Node(usize, usize),
}

pub struct GraphInput {
    pub descriptor: OperandDescriptor,
    bytes: Vec<u8>,
    constant: bool,
    /// Moved data (replaced by positions in the reference) rather than indices.
    moved: bool,
}

#[derive(Default)]
pub struct TestGraph {
    pub inputs: Vec<GraphInput>,
    pub nodes: Vec<(Op, Vec<Val>)>,
    pub outputs: Vec<Val>,
}

impl TestGraph {
    pub fn input(
        &mut self,
        descriptor: OperandDescriptor,
        bytes: Vec<u8>,
        constant: bool,
        moved: bool,
    ) -> Val {
        self.inputs.push(GraphInput {
            descriptor,
            bytes,
            constant,
            moved,
        });
        Val::Input(self.inputs.len() - 1)
    }

    pub fn node(&mut self, op: Op, inputs: Vec<Val>) -> Val {
        self.nodes.push((op, inputs));
        Val::Node(self.nodes.len() - 1, 0)
    }

    /// Builds and dispatches the graph; returns the bytes of each output.
    pub fn run_gpu(&self, ctx: &Context) -> Result<Vec<Vec<u8>>> {
        block_on(async {
            let mut builder = GraphBuilder::new(ctx)?;
            let mut inputs = Vec::new();
            let mut feeds = Vec::new();
            for (k, input) in self.inputs.iter().enumerate() {
                if input.constant {
                    inputs.push(builder.constant(input.descriptor.clone(), &input.bytes)?);
                } else {
                    let name = format!("in{k}");
                    inputs.push(builder.input(&name, input.descriptor.clone())?);
                    let descriptor = TensorDescriptor {
                        operand: input.descriptor.clone(),
                        readable: false,
                        writable: true,
                    };
                    let t = ctx.create_tensor(descriptor).await?;
                    ctx.write_tensor(&t, &input.bytes)?;
                    feeds.push((name, t));
                }
            }
            let mut nodes: Vec<Vec<Operand>> = Vec::new();
            let operand = |v: Val, nodes: &Vec<Vec<Operand>>| match v {
                Val::Input(k) => inputs[k],
                Val::Node(n, o) => nodes[n][o],
            };
            for (op, args) in &self.nodes {
                let args: Vec<Operand> = args.iter().map(|&v| operand(v, &nodes)).collect();
                nodes.push(builder.operator(op.clone(), &args, "")?);
            }
            let named: Vec<(String, Operand)> = self
                .outputs
                .iter()
                .enumerate()
                .map(|(k, &v)| (format!("out{k}"), operand(v, &nodes)))
                .collect();
            let mut results: Vec<(String, Tensor)> = Vec::new();
            for (name, o) in &named {
                let descriptor = TensorDescriptor {
                    operand: builder.descriptor(*o)?.clone(),
                    readable: true,
                    writable: false,
                };
                results.push((name.clone(), ctx.create_tensor(descriptor).await?));
            }
            let graph = builder.build(&named).await?;
            ctx.dispatch(&graph, &feeds, &results)?;
            let mut out = Vec::new();
            for (_, t) in &results {
                out.push(ctx.read_tensor(t).await?);
            }
            Ok(out)
        })
    }

    /// The expected bytes of each output, from the float64 reference on position tensors.
    pub fn run_reference(&self) -> Vec<Vec<u8>> {
        let mut pool: Vec<&[u8]> = Vec::new();
        let mut element_size = 0;
        let values: Vec<HostTensor> = self
            .inputs
            .iter()
            .map(|input| {
                let d = &input.descriptor;
                if !input.moved {
                    return HostTensor::from_bytes(d.clone(), &input.bytes).unwrap();
                }
                element_size = d.data_type.byte_size() as usize;
                let start = pool.len();
                pool.extend(input.bytes.chunks_exact(element_size));
                let positions = (start..pool.len()).map(|p| p as f64).collect();
                HostTensor::new(
                    OperandDescriptor::new(DataType::Int32, d.shape.clone()),
                    positions,
                )
                .unwrap()
            })
            .collect();
        let mut nodes: Vec<Vec<HostTensor>> = Vec::new();
        let value = |v: Val, nodes: &Vec<Vec<HostTensor>>| match v {
            Val::Input(k) => values[k].clone(),
            Val::Node(n, o) => nodes[n][o].clone(),
        };
        for (op, args) in &self.nodes {
            let args: Vec<HostTensor> = args.iter().map(|&v| value(v, &nodes)).collect();
            nodes.push(
                reference_op(op, &args).unwrap_or_else(|e| panic!("reference of {op:?}: {e}")),
            );
        }
        self.outputs
            .iter()
            .map(|&v| {
                value(v, &nodes)
                    .data
                    .iter()
                    .flat_map(|&p| pool[p as usize].iter().copied())
                    .collect()
            })
            .collect()
    }

    /// Runs on the GPU and checks every output byte against the reference.
    pub fn check(&self, ctx: &Context, what: &str) {
        let expected = self.run_reference();
        let got = self
            .run_gpu(ctx)
            .unwrap_or_else(|e| panic!("{what}: gpu failed: {e}"));
        assert_eq!(got.len(), expected.len(), "{what}: output count");
        for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g.len(), e.len(), "{what}: output {k} byte length");
            if let Some(i) = (0..g.len()).find(|&i| g[i] != e[i]) {
                panic!(
                    "{what}: output {k} byte {i}: gpu {:#04x} vs reference {:#04x}",
                    g[i], e[i]
                );
            }
        }
    }
}

/// Random bit patterns, with the special values of the type first.
pub fn random_bytes(rng: &mut Rng, descriptor: &OperandDescriptor) -> Vec<u8> {
    let specials: Vec<Vec<u8>> = match descriptor.data_type {
        // Signaling NaN, NaN with payload, -0, smallest subnormal, -infinity.
        DataType::Float16 => [0x7c01u16, 0xfd55, 0x8000, 0x0001, 0xfc00]
            .iter()
            .map(|v| v.to_le_bytes().to_vec())
            .collect(),
        DataType::Float32 => [
            0x7f80_0001u32,
            0xffc0_1234,
            0x8000_0000,
            0x0000_0001,
            0xff80_0000,
        ]
        .iter()
        .map(|v| v.to_le_bytes().to_vec())
        .collect(),
        _ => Vec::new(),
    };
    let size = descriptor.byte_length() as usize;
    let mut bytes: Vec<u8> = specials.concat();
    bytes.truncate(size);
    while bytes.len() < size {
        bytes.push(rng.next_u64() as u8);
    }
    bytes
}

/// One operator over one moved input (the other inputs given as values), with graph inputs and
/// then with constants.
pub fn check_moved(
    ctx: &Context,
    rng: &mut Rng,
    op: Op,
    moved: &[OperandDescriptor],
    others: &[HostTensor],
) {
    for constant in [false, true] {
        let mut g = TestGraph::default();
        let mut args: Vec<Val> = moved
            .iter()
            .map(|d| g.input(d.clone(), random_bytes(rng, d), constant, true))
            .collect();
        for t in others {
            args.push(g.input(t.descriptor.clone(), t.to_bytes(), constant, false));
        }
        let out = g.node(op.clone(), args);
        let outputs = match &op {
            Op::Split { .. } => {
                let descs: Vec<&OperandDescriptor> = moved.iter().collect();
                let n = ops::validate(&op, &descs).unwrap().len();
                (0..n).map(|k| Val::Node(0, k)).collect()
            }
            _ => vec![out],
        };
        g.outputs = outputs;
        let shapes: Vec<String> = moved.iter().map(|d| d.to_string()).collect();
        g.check(ctx, &format!("{op:?} on {shapes:?} (constant {constant})"));
    }
}

pub fn desc(data_type: DataType, shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(data_type, shape.to_vec())
}

pub fn is_type_error<T: std::fmt::Debug>(r: Result<T>) -> bool {
    matches!(r, Err(Error::Type(_)))
}

pub fn validate(op: &Op, inputs: &[OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
    ops::validate(op, &refs)
}
