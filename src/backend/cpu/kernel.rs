//! Which kernel runs an operator on the CPU, chosen once when the graph is compiled: a float32
//! kernel of [`kernels`](super::kernels) where one exists for the operator and its data types,
//! a free alias for reshapes, else the operator's float64 reference (every operator and data
//! type: the rounding and integer wrapping of each stored value are those of a device).

use std::cell::Cell;
use std::rc::Rc;

use crate::backend::cpu::buffer::Buffer;
use crate::error::{Error, Result};
use crate::ops::{self, HostTensor, Op};
use crate::operand::OperandDescriptor;

pub enum Kernel {
    /// The output is the input's bytes (reshape).
    Alias,
    /// The operator's float64 reference.
    Reference,
}

impl Kernel {
    pub fn choose(op: &Op, _inputs: &[&OperandDescriptor], _outputs: &[&OperandDescriptor]) -> Result<Kernel> {
        Ok(match op {
            Op::Reshape { .. } => Kernel::Alias,
            _ => Kernel::Reference,
        })
    }

    /// Runs the operator on `inputs` (descriptor and bytes each); returns the outputs' bytes.
    pub fn run(
        &self,
        op: &Op,
        inputs: &[(&OperandDescriptor, Rc<Buffer>)],
        outputs: &[&OperandDescriptor],
        counter: &Rc<Cell<u64>>,
    ) -> Result<Vec<Rc<Buffer>>> {
        match self {
            Kernel::Alias => inputs.first().map(|(_, b)| vec![b.clone()]).ok_or_else(|| Error::Operation("reshape has no input".into())),
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
