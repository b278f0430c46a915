//! The graph cache on the CPU backend. A CPU graph's compiled form is a kernel choice per
//! operator over the builder's IR, so the record is the IR: operand descriptors, operators with
//! their options, the named inputs and outputs and which operands are constants. Loading it
//! skips the JavaScript that built the graph and the model download; it does run the operators'
//! shape validation again, because the CPU kernels index wasm memory by those shapes and a
//! record comes from storage the page does not control. Kernels are chosen again (a lookup);
//! the constants stay in their saved files (the `"disk"` tier) until the graph is made resident.

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::backend::cpu::context::CpuContext;
use crate::backend::cpu::graph::CpuGraph;
use crate::backend::cpu::loader::saved_constant;
use crate::backend::saved::{self, Header};
use crate::error::{Error, Result};
use crate::graph::{ConstantValue, GraphDescription, OperandSource, Operator};
use crate::memory::SharedConstant;
use crate::operand::OperandDescriptor;
use crate::ops::{self, Op};
use crate::weights::Source;

#[derive(Serialize, Deserialize)]
struct Record {
    header: Header,
    descriptors: Vec<OperandDescriptor>,
    operators: Vec<SavedOperator>,
    inputs: Vec<(String, usize)>,
    outputs: Vec<(String, usize)>,
    /// The operand of each constant, in the order their bytes are saved.
    constants: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
struct SavedOperator {
    op: Op,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    label: String,
}

fn header() -> Header {
    Header::new("cpu", format!("{} (SIMD128)", std::env::consts::ARCH))
}

impl CpuGraph {
    /// `saveGraph`: the record of this graph and its constants, in the order the record numbers
    /// them (each one's bytes are its host copy).
    pub fn save(&self) -> Result<(Vec<u8>, Vec<Rc<SharedConstant>>)> {
        self.check_usable()?;
        let inner = &self.inner;
        let named = |list: &[(String, OperandDescriptor)], operands: &[usize]| {
            list.iter().zip(operands).map(|((name, _), &operand)| (name.clone(), operand)).collect()
        };
        let record = Record {
            header: header(),
            descriptors: inner.descriptors.clone(),
            operators: inner
                .steps
                .iter()
                .map(|s| SavedOperator {
                    op: s.operator.op.clone(),
                    inputs: s.operator.inputs.clone(),
                    outputs: s.operator.outputs.clone(),
                    label: s.operator.label.clone(),
                })
                .collect(),
            inputs: named(&inner.inputs, &inner.input_operands),
            outputs: named(&inner.outputs, &inner.output_operands),
            constants: inner.constants.iter().map(|(operand, _)| *operand).collect(),
        };
        let constants = inner.constants.iter().map(|(_, c)| c.clone()).collect();
        Ok((saved::write(&record)?, constants))
    }

    /// The bytes saved for `constant` (one of [`save`](Self::save)'s): its host copy, or for a
    /// constant from a file, its bytes read again.
    pub async fn saved_constant_bytes(&self, constant: &Rc<SharedConstant>) -> Result<Vec<u8>> {
        self.check_usable()?;
        if let Some(bytes) = constant.host_copy() {
            return Ok(bytes);
        }
        let (buffer, _) = self.context().resident_constant(constant, &Default::default()).await?;
        Ok(buffer.bytes().to_vec())
    }

    /// `loadGraph`: the graph of `record`, with the bytes of constant `i` in the source
    /// `constants[i]`, named by its content hash (loaded graphs share the constants of one
    /// name). `NotFoundError` for a record of another version or backend, `DataError` for a
    /// corrupt one (an operator whose outputs are not what its inputs give included).
    pub fn load<S: Source + 'static>(context: &CpuContext, record: &[u8], constants: Vec<(String, Rc<S>)>) -> Result<CpuGraph> {
        context.check_not_lost()?;
        let record: Record = saved::read(record, &header())?;
        let corrupt = |what: String| Error::Data(format!("the saved graph is corrupt: {what}"));
        let n = record.descriptors.len();
        for descriptor in &record.descriptors {
            descriptor.check_dimensions().map_err(|e| corrupt(e.message().into()))?;
            context.check_tensor_byte_length(descriptor).map_err(|e| corrupt(e.message().into()))?;
        }
        if constants.len() != record.constants.len() {
            return Err(corrupt(format!("it has {} constants but {} were given", record.constants.len(), constants.len())));
        }
        // Every operand gets its value once, before any operator reads it.
        let mut sources: Vec<Option<OperandSource>> = vec![None; n];
        let define = |sources: &mut Vec<Option<OperandSource>>, operand: usize, source: OperandSource| {
            match sources.get_mut(operand) {
                Some(slot @ None) => {
                    *slot = Some(source);
                    Ok(())
                }
                _ => Err(corrupt(format!("operand {operand} is out of range or defined twice"))),
            }
        };
        for (name, operand) in &record.inputs {
            define(&mut sources, *operand, OperandSource::Input(name.clone()))?;
        }
        for (&operand, (key, source)) in record.constants.iter().zip(constants) {
            let expected = record.descriptors.get(operand).map(|d| d.byte_length());
            if expected != Some(source.len()) {
                return Err(Error::Data(format!(
                    "the saved constant {key} ({}) of operand {operand} holds {} bytes, the saved graph expects {expected:?}",
                    source.name(),
                    source.len()
                )));
            }
            let shared = saved_constant(context, &key, &source);
            define(&mut sources, operand, OperandSource::Constant(ConstantValue::Bytes(shared)))?;
        }
        let mut operators = Vec::with_capacity(record.operators.len());
        for (index, saved) in record.operators.into_iter().enumerate() {
            let inputs: Vec<&OperandDescriptor> = saved
                .inputs
                .iter()
                .map(|&i| sources.get(i).and_then(|s| s.as_ref()).map(|_| &record.descriptors[i]))
                .collect::<Option<_>>()
                .ok_or_else(|| corrupt(format!("operator {index} reads an operand not defined before it")))?;
            let produced = ops::validate(&saved.op, &inputs).map_err(|e| corrupt(format!("operator {index}: {}", e.message())))?;
            let recorded: Option<Vec<&OperandDescriptor>> = saved.outputs.iter().map(|&o| record.descriptors.get(o)).collect();
            if recorded.is_none_or(|r| !r.iter().copied().eq(produced.iter())) {
                return Err(corrupt(format!("operator {index}'s outputs are not what its inputs give")));
            }
            for (output_index, &operand) in saved.outputs.iter().enumerate() {
                define(&mut sources, operand, OperandSource::Operator { operator: index, output_index })?;
            }
            operators.push(Operator { op: saved.op, inputs: saved.inputs, outputs: saved.outputs, label: saved.label });
        }
        let mut outputs = std::collections::BTreeMap::new();
        for (name, operand) in record.outputs {
            // As build() requires: an operator's output, under one name.
            let computed = matches!(sources.get(operand), Some(Some(OperandSource::Operator { .. })));
            if !computed || name.is_empty() || outputs.insert(name, operand).is_some() {
                return Err(corrupt("an output is not an operator's, or is named twice".into()));
            }
        }
        if outputs.is_empty() {
            return Err(corrupt("it has no output".into()));
        }
        let named_inputs = record.inputs.len();
        let inputs = record.inputs.into_iter().collect::<std::collections::BTreeMap<_, _>>();
        if inputs.len() != named_inputs {
            return Err(corrupt("an input is named twice".into()));
        }
        // Operands of the builder that the graph does not reach have no value; nothing reads them.
        let sources = sources.into_iter().map(|s| s.unwrap_or(OperandSource::Input(String::new()))).collect();
        let description = GraphDescription { descriptors: record.descriptors, sources, operators, inputs, outputs };
        CpuGraph::compile(context, description)
    }
}
