//! triangular: keeps the upper or lower triangle of the last two dimensions (a batch of
//! matrices) and zeroes the rest.
//!
//! Element `(row, col)` is kept when `col - row >= diagonal` (upper) or `col - row <= diagonal`
//! (lower). Kept elements are copied as raw bits; zero is the all-zero bit pattern in every type.

use crate::error::Result;
use crate::operand::MAX_RANK;
use crate::operand::OperandDescriptor;
use crate::ops::limits::{self, OpLimits, ALL_TYPES};
use crate::ops::movement::{MoveKernel, Source};
use crate::ops::reference::HostTensor;
use crate::ops::wgsl::{BufRef, LowerRequest, Lowering};
use crate::ops::{not_this_family, MethodOptions, Op, OpFamily};

/// `MLTriangularOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TriangularOptions {
    pub upper: bool,
    pub diagonal: i32,
}

impl Default for TriangularOptions {
    fn default() -> Self {
        TriangularOptions { upper: true, diagonal: 0 }
    }
}

pub fn limits() -> Vec<OpLimits> {
    vec![OpLimits {
        name: "triangular",
        operands: vec![
            limits::tensor("input", ALL_TYPES, 2, MAX_RANK as u32),
            limits::tensor("output", ALL_TYPES, 2, MAX_RANK as u32),
        ],
    }]
}

pub fn validate(inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
    limits::check(&limits::of("triangular")?.operands[0], inputs[0])?;
    Ok(vec![inputs[0].clone()])
}

/// `(rows, cols)` of the matrices: the last two dimensions.
fn matrix(shape: &[u32]) -> (u64, u64) {
    let r = shape.len();
    (shape[r - 2] as u64, shape[r - 1] as u64)
}

pub fn lower(o: &TriangularOptions, request: &LowerRequest) -> Result<Lowering> {
    let (input, out) = (request.inputs[0], request.outputs[0]);
    let (rows, cols) = matrix(&input.shape);
    let keep = if o.upper { "col - row >= d" } else { "col - row <= d" };
    // i64 is not in WGSL: the difference and the diagonal compare in i32 after clamping the
    // diagonal to a range that decides the same (dimensions are below 2^31).
    let d = (o.diagonal as i64).clamp(-(rows as i64), cols as i64);
    let body = format!(
        "    let col = i32(i % {cols}u);\n    let row = i32((i / {cols}u) % {rows}u);\n    let d = {d};\n    return select(Bits(), bits_input(i), {keep});"
    );
    let launch = MoveKernel {
        sources: vec![Source { name: "input", buffer: BufRef::Input(0), descriptor: input }],
        output: BufRef::Output(0),
        output_descriptor: out,
        helpers: String::new(),
        body,
    }
    .build()?;
    Ok(Lowering::single(launch))
}

pub fn reference(
    o: &TriangularOptions,
    inputs: &[HostTensor],
    outputs: &[OperandDescriptor],
) -> Result<Vec<HostTensor>> {
    let input = &inputs[0];
    let (rows, cols) = matrix(input.shape());
    let data = input
        .data
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (col, row) = ((i as u64 % cols) as i64, ((i as u64 / cols) % rows) as i64);
            let keep = if o.upper { col - row >= o.diagonal as i64 } else { col - row <= o.diagonal as i64 };
            if keep {
                v
            } else {
                0.0
            }
        })
        .collect();
    Ok(vec![HostTensor::new(outputs[0].clone(), data)?])
}

/// The registry's entry for this file's operators (see [`OpFamily`]).
pub struct Family;

impl OpFamily for Family {
    fn limits(&self) -> Vec<OpLimits> {
        limits()
    }

    fn from_options(&self, name: &str, p: &dyn MethodOptions) -> Result<Op> {
        Ok(match name {
            "triangular" => Op::Triangular(TriangularOptions { upper: p.bool("upper")?, diagonal: p.i32("diagonal")? }),
            other => return Err(crate::ops::unknown_method(other)),
        })
    }

    fn name(&self, op: &Op) -> &'static str {
        match op {
            Op::Triangular(_) => "triangular",
            _ => "",
        }
    }

    fn validate(&self, op: &Op, inputs: &[&OperandDescriptor]) -> Result<Vec<OperandDescriptor>> {
        match op {
            Op::Triangular(_) => validate(inputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn lower(&self, op: &Op, request: &LowerRequest) -> Result<Lowering> {
        match op {
            Op::Triangular(o) => lower(o, request),
            _ => Err(not_this_family(op)),
        }
    }

    fn reference(&self, op: &Op, inputs: &[HostTensor], outputs: &[OperandDescriptor]) -> Result<Vec<HostTensor>> {
        match op {
            Op::Triangular(o) => reference(o, inputs, outputs),
            _ => Err(not_this_family(op)),
        }
    }

    fn moves_input(&self, op: &Op, _index: usize) -> bool {
        match op {
            Op::Triangular(_) => true,
            _ => false,
        }
    }
}
