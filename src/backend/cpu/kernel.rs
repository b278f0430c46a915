//! Which kernel runs an operator on the CPU, chosen once when the graph is compiled: a float32
//! kernel of [`kernels`](super::kernels) where one exists for the operator and its data types,
//! a kernel on raw bytes ([`typed`]) for other data types and several outputs, a free alias
//! for reshapes, else the operator's float64 reference (every operator and data type: the
//! rounding and integer wrapping of each stored value are those of a device).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::backend::cpu::buffer::Buffer;
use crate::backend::cpu::kernels::chain::Chain;
use crate::backend::cpu::kernels::{conv2d, float16, float32, gather, gemm, quantized, typed};
use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::ops::conv2d::{conv2d_geometry, conv_transpose2d_geometry, ConvGeometry};
use crate::ops::matmul::GemmOptions;
use crate::ops::{self, HostTensor, Op};

pub enum Kernel {
    /// The output is the input's bytes (reshape).
    Alias,
    /// With a constant rank-2 B, B packed once.
    Matmul(Option<Prepacked<gemm::Packed>>),
    /// With a constant B, `op(B)` packed once.
    Gemm(GemmOptions, Option<Prepacked<gemm::Packed>>),
    /// With a constant filter, the filter packed once.
    Conv2d(ConvGeometry, Option<Prepacked<conv2d::PackedFilter>>),
    ConvTranspose2d(ConvGeometry),
    /// One of [`float32::run`]'s kernels.
    Float32,
    /// One of [`typed::run`]'s kernels (any data types, several outputs).
    Typed,
    /// A float32 kernel on float16 operands: float16 is stored as float16 and computed in
    /// float32, each output rounded to float16 once.
    Float16(Box<Kernel>),
    /// The operator's float64 reference.
    Reference,
    /// The last operator of a chain of element-wise operators, which computes the whole chain
    /// from the chain's inputs (the operand indices); the others are `Absorbed`.
    Chain(Chain, Vec<usize>),
    /// An operator computed by the chain kernel of a later one.
    Absorbed,
    /// A float32 matmul or gemm whose B is one entry of a stack, `gather(stack, index, {axis: 0})`
    /// reshaped or not (the gather and reshape are `Absorbed`): B is read from the stack in place
    /// instead of copied. Runs on the operands listed (A, the stack, the index, then C) with B of
    /// shape `b_shape`.
    Gathered { product: Op, reads: Vec<usize>, b_shape: Vec<u32> },
    /// A float32 matmul or gemm whose B is `dequantizeLinear` of an 8-bit constant with a scale
    /// per tensor or per output column (the dequantizeLinear is `Absorbed`): B's integers are
    /// packed once ([`quantized::QuantizedB`]) and the product runs on the operands listed (A,
    /// the quantized constant, its scale and zero point, then C).
    Dequantized { product: Op, reads: Vec<usize>, packed: Prepacked<quantized::QuantizedB> },
    /// matmul with a rank-2 B, or gemm without aTranspose, all of whose operands are float16
    /// ([`float16`]): a constant B is widened and packed once (`packed`); otherwise a single row
    /// streams B's float16 bits and larger products widen B for the call.
    Float16Product { product: Op, packed: Option<Prepacked<gemm::Packed>> },
}

impl Kernel {
    /// `constant[i]`: whether input `i` is a constant of the graph.
    pub fn choose(op: &Op, inputs: &[&OperandDescriptor], outputs: &[&OperandDescriptor], constant: &[bool]) -> Result<Kernel> {
        if let Op::Reshape { .. } = op {
            return Ok(Kernel::Alias);
        }
        if typed::handles(op, inputs, outputs) {
            return Ok(Kernel::Typed);
        }
        let halves = inputs.iter().chain(outputs).all(|d| d.data_type == DataType::Float16);
        let product = match op {
            Op::Matmul => inputs.get(1).is_some_and(|b| b.shape.len() == 2),
            Op::Gemm(o) => !o.a_transpose,
            _ => false,
        };
        if halves && product && outputs.len() == 1 {
            return Ok(Kernel::Float16Product { product: op.clone(), packed: (constant.get(1) == Some(&true)).then(Prepacked::default) });
        }
        let floats = inputs.iter().chain(outputs).all(|d| matches!(d.data_type, DataType::Float32 | DataType::Float16));
        if floats && inputs.iter().chain(outputs).any(|d| d.data_type == DataType::Float16) {
            // The widened copies are new each dispatch: nothing to keep packed.
            let widened = |ds: &[&OperandDescriptor]| ds.iter().map(|d| OperandDescriptor::new(DataType::Float32, d.shape.clone())).collect::<Vec<_>>();
            let (inputs, outputs) = (widened(inputs), widened(outputs));
            let (input_refs, output_refs): (Vec<_>, Vec<_>) = (inputs.iter().collect(), outputs.iter().collect());
            return Ok(match Kernel::choose(op, &input_refs, &output_refs, &[])? {
                Kernel::Reference => Kernel::Reference,
                inner => Kernel::Float16(Box::new(inner)),
            });
        }
        let float32 = inputs.iter().chain(outputs).all(|d| d.data_type == DataType::Float32) && outputs.len() == 1;
        if !float32 {
            return Ok(Kernel::Reference);
        }
        Ok(match op {
            Op::Matmul => Kernel::Matmul((constant.get(1) == Some(&true) && inputs[1].shape.len() == 2).then(Prepacked::default)),
            Op::Gemm(o) => Kernel::Gemm(o.clone(), (constant.get(1) == Some(&true)).then(Prepacked::default)),
            Op::Conv2d(o) => Kernel::Conv2d(conv2d_geometry(o, inputs)?, (constant.get(1) == Some(&true)).then(Prepacked::default)),
            Op::ConvTranspose2d(o) => Kernel::ConvTranspose2d(conv_transpose2d_geometry(o, inputs)?),
            op if float32::handles(op) => Kernel::Float32,
            _ => Kernel::Reference,
        })
    }

    /// Runs the operator on `inputs` (descriptor and bytes each); returns the outputs' bytes.
    pub fn run(
        &self,
        op: &Op,
        inputs: &[(&OperandDescriptor, Rc<Buffer>)],
        outputs: &[&OperandDescriptor],
        memory: &Memory,
    ) -> Result<Vec<Rc<Buffer>>> {
        let counter = memory.counter;
        let input = |k: usize| inputs.get(k).map(|(_, b)| b.f32()).ok_or_else(|| Error::Operation(format!("{}: input {k} is missing", op.name())));
        let shape = |k: usize| inputs.get(k).map(|(d, _)| d.shape.as_slice()).unwrap_or(&[]);
        let float32_output = |f: &mut dyn FnMut(&mut [f32]) -> Result<()>| -> Result<Vec<Rc<Buffer>>> {
            let descriptor = outputs.first().ok_or_else(|| Error::Operation(format!("{}: no output", op.name())))?;
            let mut buffer = Buffer::zeroed(descriptor.byte_length() as usize, counter)?;
            f(buffer.f32_mut())?;
            Ok(vec![Rc::new(buffer)])
        };
        match self {
            Kernel::Gathered { product, b_shape, .. } => float32_output(&mut |out| {
                let (stack_descriptor, stack) = &inputs.get(1).ok_or_else(|| Error::Operation("gathered B: no stack".into()))?;
                let (index_descriptor, index) = &inputs.get(2).ok_or_else(|| Error::Operation("gathered B: no index".into()))?;
                let rows = stack_descriptor.shape.first().copied().unwrap_or(0) as usize;
                let entry = b_shape.iter().map(|&d| d as usize).product::<usize>();
                let start = gather::first_position((index_descriptor, index.bytes()), rows)? * entry;
                let b = stack.f32().get(start..start + entry).ok_or_else(|| Error::Operation("gathered B: the stack is shorter than its shape".into()))?;
                match product {
                    Op::Matmul => gemm::matmul_prepacked(input(0)?, shape(0), b, b_shape, None, out),
                    Op::Gemm(o) => {
                        let c = if o.has_c { Some((input(3)?, shape(3))) } else { None };
                        let (alpha, beta) = (o.alpha as f32, o.beta as f32);
                        gemm::gemm_op_prepacked(input(0)?, shape(0), b, b_shape, None, c, alpha, beta, o.a_transpose, o.b_transpose, out)
                    }
                    _ => Err(Error::Operation(format!("{} does not read a gathered B", product.name()))),
                }
            }),
            Kernel::Dequantized { product, packed, .. } => float32_output(&mut |out| {
                let operand = |k: usize| inputs.get(k).ok_or_else(|| Error::Operation(format!("dequantized B: input {k} is missing")));
                let ((q_descriptor, q), (scale_descriptor, scale), (_, zero_point)) = (operand(1)?, operand(2)?, operand(3)?);
                let transposed = matches!(product, Op::Gemm(o) if o.b_transpose);
                let build = |q: &Buffer| quantized::QuantizedB::new((q_descriptor, q.bytes()), (scale_descriptor, scale.f32()), zero_point.bytes(), transposed);
                let bound = quantized::QuantizedB::bound(q_descriptor, transposed);
                // Packed once where it fits the budget, else for this call only.
                let b = match packed.get(q, memory, bound, build, quantized::QuantizedB::bytes)? {
                    Some(b) => b,
                    None => Rc::new(build(q)?),
                };
                match product {
                    Op::Matmul => quantized::matmul(input(0)?, shape(0), &b, out),
                    Op::Gemm(o) => {
                        let c = if o.has_c { Some((input(4)?, shape(4))) } else { None };
                        quantized::gemm_op(input(0)?, shape(0), &b, c, o.alpha as f32, o.beta as f32, o.a_transpose, out)
                    }
                    _ => Err(Error::Operation(format!("{} does not read a dequantized B", product.name()))),
                }
            }),
            Kernel::Float16Product { product, packed } => {
                let operand = |k: usize| inputs.get(k).ok_or_else(|| Error::Operation(format!("{}: input {k} is missing", op.name())));
                let ((a_descriptor, a), (b_descriptor, b)) = (operand(0)?, operand(1)?);
                let dims = float16::dims(product, &a_descriptor.shape, &b_descriptor.shape)?;
                let a = float16_to_float32(a, counter)?;
                let bits: &[u16] = bytemuck::try_cast_slice(&b.bytes()[..b.len() / 2 * 2]).map_err(|_| Error::Operation("float16 bytes are not aligned".into()))?;
                let (_, k, n, transposed) = dims;
                // Packed from this call's bits of B, which are the buffer `get` keys it by.
                let build = |_: &Buffer| float16::pack(bits, (k, n), transposed);
                let pack = || match packed {
                    Some(p) => p.get(b, memory, gemm::Packed::right_bytes(k, n), build, gemm::Packed::bytes),
                    None => Ok(None),
                };
                let descriptor = outputs.first().ok_or_else(|| Error::Operation(format!("{}: no output", op.name())))?;
                let mut wide = Buffer::zeroed(descriptor.byte_length() as usize * 2, counter)?;
                let (alpha, accumulate) = match product {
                    Op::Gemm(o) if o.has_c => {
                        let (c_descriptor, c) = operand(2)?;
                        let c = float16_to_float32(c, counter)?;
                        gemm::fill_c((c.f32(), &c_descriptor.shape), o.beta as f32, dims.0, n, wide.f32_mut())?;
                        (o.alpha as f32, true)
                    }
                    Op::Gemm(o) => (o.alpha as f32, false),
                    _ => (1.0, false),
                };
                float16::product(a.f32(), bits, dims, &pack, alpha, wide.f32_mut(), accumulate)?;
                Ok(vec![Rc::new(float32_to_float16(&wide, counter)?)])
            }
            Kernel::Alias => inputs.first().map(|(_, b)| vec![b.clone()]).ok_or_else(|| Error::Operation("reshape has no input".into())),
            Kernel::Matmul(prepacked) => float32_output(&mut |out| {
                let (k, n) = (shape(1)[0] as usize, shape(1)[1] as usize);
                let pack = |b: &[f32]| gemm::Packed::right(gemm::Matrix::row_major(b, k, n));
                let b = match prepacked {
                    Some(p) => p.get(&inputs[1].1, memory, gemm::Packed::right_bytes(k, n), |b| pack(b.f32()), gemm::Packed::bytes)?,
                    None => None,
                };
                gemm::matmul_prepacked(input(0)?, shape(0), input(1)?, shape(1), b.as_deref(), out)
            }),
            Kernel::Gemm(o, prepacked) => float32_output(&mut |out| {
                let c = if o.has_c { Some((input(2)?, shape(2))) } else { None };
                let pack = |b: &[f32]| gemm::Packed::right(gemm::gemm_b(b, shape(1), o.b_transpose)?);
                let (k, n) = if o.b_transpose { (shape(1)[1], shape(1)[0]) } else { (shape(1)[0], shape(1)[1]) };
                let b = match prepacked {
                    Some(p) => p.get(&inputs[1].1, memory, gemm::Packed::right_bytes(k as usize, n as usize), |b| pack(b.f32()), gemm::Packed::bytes)?,
                    None => None,
                };
                let (alpha, beta) = (o.alpha as f32, o.beta as f32);
                gemm::gemm_op_prepacked(input(0)?, shape(0), input(1)?, shape(1), b.as_deref(), c, alpha, beta, o.a_transpose, o.b_transpose, out)
            }),
            Kernel::Conv2d(g, prepacked) => float32_output(&mut |out| {
                let bias = if inputs.len() > 2 { Some(input(2)?) } else { None };
                // The filter rearranged, and packed for the GEMM: at most (2 Cout + 7) x its depth.
                let depth = input(1)?.len() / (g.output_channels as usize).max(1);
                let bound = ((2 * g.output_channels as usize + 7) * depth * 4) as u64;
                let packed = match prepacked {
                    Some(p) => p.get(&inputs[1].1, memory, bound, |f| conv2d::PackedFilter::new(g, f.f32()), conv2d::PackedFilter::bytes)?,
                    None => None,
                };
                match packed {
                    Some(filter) => conv2d::conv2d_packed(g, input(0)?, &filter, bias, out),
                    None => conv2d::conv2d(g, input(0)?, input(1)?, bias, out),
                }
            }),
            Kernel::ConvTranspose2d(g) => float32_output(&mut |out| {
                let bias = if inputs.len() > 2 { Some(input(2)?) } else { None };
                conv2d::conv_transpose2d(g, input(0)?, input(1)?, bias, out)
            }),
            Kernel::Float32 => {
                let operands: Vec<(&OperandDescriptor, &[f32])> = inputs.iter().map(|(d, b)| (*d, b.f32())).collect();
                let mut ran = None;
                let result = float32_output(&mut |out| {
                    let descriptor = outputs[0];
                    ran = float32::run(op, &operands, (descriptor, out));
                    ran.clone().unwrap_or(Ok(()))
                })?;
                match ran {
                    Some(_) => Ok(result),
                    None => Kernel::Reference.run(op, inputs, outputs, memory),
                }
            }
            Kernel::Float16(inner) => {
                let widen = |d: &OperandDescriptor| OperandDescriptor::new(DataType::Float32, d.shape.clone());
                let wide_inputs = inputs
                    .iter()
                    .map(|(d, b)| Ok((widen(d), if d.data_type == DataType::Float16 { Rc::new(float16_to_float32(b, counter)?) } else { b.clone() })))
                    .collect::<Result<Vec<_>>>()?;
                let wide_outputs: Vec<OperandDescriptor> = outputs.iter().map(|d| widen(d)).collect();
                let operands: Vec<(&OperandDescriptor, Rc<Buffer>)> = wide_inputs.iter().map(|(d, b)| (d, b.clone())).collect();
                let results = inner.run(op, &operands, &wide_outputs.iter().collect::<Vec<_>>(), memory)?;
                outputs
                    .iter()
                    .zip(results)
                    .map(|(d, b)| if d.data_type == DataType::Float16 { Ok(Rc::new(float32_to_float16(&b, counter)?)) } else { Ok(b) })
                    .collect()
            }
            Kernel::Typed => {
                let mut buffers = outputs
                    .iter()
                    .map(|d| Buffer::zeroed(d.byte_length() as usize, counter))
                    .collect::<Result<Vec<_>>>()?;
                let operands: Vec<(&OperandDescriptor, &[u8])> = inputs.iter().map(|(d, b)| (*d, b.bytes())).collect();
                let mut results: Vec<(&OperandDescriptor, &mut [u8])> =
                    outputs.iter().copied().zip(buffers.iter_mut().map(Buffer::bytes_mut)).collect();
                match typed::run(op, &operands, &mut results) {
                    Some(ran) => ran.map(|()| buffers.into_iter().map(Rc::new).collect()),
                    None => Kernel::Reference.run(op, inputs, outputs, memory),
                }
            }
            Kernel::Chain(chain, _) => float32_output(&mut |out| {
                let operands: Vec<(&OperandDescriptor, &[f32])> = inputs.iter().map(|(d, b)| (*d, b.f32())).collect();
                chain.run(&operands, outputs[0], out)
            }),
            Kernel::Absorbed => Err(Error::Operation(format!("{}: computed by a chain kernel", op.name()))),
            Kernel::Reference => {
                let hosts = inputs
                    .iter()
                    .map(|(d, b)| HostTensor::from_bytes((*d).clone(), b.bytes()))
                    .collect::<Result<Vec<_>>>()?;
                let descriptors: Vec<OperandDescriptor> = outputs.iter().map(|d| (*d).clone()).collect();
                ops::reference(op, &hosts, &descriptors)?
                    .into_iter()
                    .map(|t| Ok(Rc::new(Buffer::from_bytes(&t.to_bytes(), counter)?)))
                    .collect()
            }
        }
    }
}

/// float16 bytes widened to float32 (exactly).
fn float16_to_float32(bytes: &Buffer, counter: &Rc<Cell<u64>>) -> Result<Buffer> {
    let mut wide = Buffer::zeroed(bytes.len() * 2, counter)?;
    let halves: &[u16] = bytemuck::try_cast_slice(&bytes.bytes()[..bytes.len() / 2 * 2]).map_err(|_| Error::Operation("float16 bytes are not aligned".into()))?;
    crate::operand::widen_f16(halves, wide.f32_mut());
    Ok(wide)
}

/// float32 values rounded to float16 (to nearest, ties to even).
fn float32_to_float16(wide: &Buffer, counter: &Rc<Cell<u64>>) -> Result<Buffer> {
    let mut narrow = Buffer::zeroed(wide.len() / 2, counter)?;
    let halves: &mut [u16] = bytemuck::try_cast_slice_mut(narrow.bytes_mut()).map_err(|_| Error::Operation("float16 bytes are not aligned".into()))?;
    crate::operand::narrow_f16(wide.f32(), halves);
    Ok(narrow)
}

/// The backend's memory as a kernel sees it: the device byte counter and the budget.
pub struct Memory<'a> {
    pub counter: &'a Rc<Cell<u64>>,
    pub budget: Option<u64>,
}

/// A constant operand rearranged once for its kernel, kept while the graph is resident (its
/// bytes count as the backend's) and rebuilt when the constant's buffer changes (a swap-in).
/// Under a budget it is made only where it fits beside what is held, evicting nothing: the
/// kernel then rearranges the constant per call, as without it.
pub struct Prepacked<T> {
    /// The constant's buffer, and its rearrangement (`None`: it did not fit).
    slot: RefCell<Option<(*const Buffer, Option<(Rc<T>, Reservation)>)>>,
}

impl<T> Default for Prepacked<T> {
    fn default() -> Self {
        Prepacked { slot: RefCell::default() }
    }
}

impl<T> Prepacked<T> {
    /// The rearrangement of `buffer`, built by `build` from it unless already there, or `None`
    /// when `bound` (at least its bytes) does not fit the budget.
    fn get(&self, buffer: &Rc<Buffer>, memory: &Memory, bound: u64, build: impl FnOnce(&Buffer) -> Result<T>, bytes: fn(&T) -> u64) -> Result<Option<Rc<T>>> {
        let key = Rc::as_ptr(buffer);
        if let Some((k, value)) = &*self.slot.borrow() {
            if *k == key {
                return Ok(value.as_ref().map(|(v, _)| v.clone()));
            }
        }
        self.slot.borrow_mut().take();
        let fits = memory.budget.is_none_or(|budget| memory.counter.get().saturating_add(bound) <= budget);
        let value = if fits { Some(Rc::new(build(buffer)?)) } else { None };
        let entry = value.as_ref().map(|v| (v.clone(), Reservation::new(bytes(v), memory.counter)));
        *self.slot.borrow_mut() = Some((key, entry));
        Ok(value)
    }

    fn release(&self) {
        self.slot.borrow_mut().take();
    }
}

/// Bytes held outside a [`Buffer`], counted in the backend's device bytes while alive.
struct Reservation {
    bytes: u64,
    counter: Rc<Cell<u64>>,
}

impl Reservation {
    fn new(bytes: u64, counter: &Rc<Cell<u64>>) -> Reservation {
        counter.set(counter.get() + bytes);
        Reservation { bytes, counter: counter.clone() }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.counter.set(self.counter.get().saturating_sub(self.bytes));
    }
}

impl Kernel {
    /// Lets go of what the kernel keeps between dispatches (when its graph leaves memory).
    pub fn release(&self) {
        match self {
            Kernel::Matmul(Some(p)) | Kernel::Gemm(_, Some(p)) => p.release(),
            Kernel::Conv2d(_, Some(p)) => p.release(),
            Kernel::Dequantized { packed, .. } => packed.release(),
            Kernel::Float16Product { packed: Some(p), .. } => p.release(),
            _ => {}
        }
    }
}
