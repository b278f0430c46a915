//! gru, gruCell, lstm and lstmCell on float32, with the reference's semantics (operand order,
//! gate rows of each layout, directions, peephole order input/output/forget, output order
//! hidden, cell, sequence). Per direction, the input projection of every step is one GEMM
//! `X[steps * batch, input] W^T` with the biases added in; each step is one GEMM
//! `h[batch, hidden] R^T` (two for gru without `resetAfter`, whose new-gate product reads the
//! reset hidden state) and gate loops over runs of `hiddenSize` that vectorise.

use crate::error::{Error, Result};
use crate::operand::OperandDescriptor;
use crate::ops::recurrent::{optional_operands, GruWeightLayout, LstmWeightLayout, RecurrentActivation, RecurrentDirection};
use crate::ops::Op;

use super::elementwise::{sigmoid_f, tanh_f};
use super::gemm::{gemm, Matrix};

/// Gate rows in units of `hiddenSize`.
#[derive(Clone, Copy)]
enum Gates {
    Gru { z: usize, r: usize, reset_after: bool },
    Lstm { i: usize, o: usize, f: usize, g: usize },
}

const N_GATE: usize = 2;

fn apply(activation: RecurrentActivation, v: &mut [f32]) {
    match activation {
        RecurrentActivation::Relu => v.iter_mut().for_each(|x| *x = x.max(0.0)),
        RecurrentActivation::Sigmoid => v.iter_mut().for_each(|x| *x = sigmoid_f(*x)),
        RecurrentActivation::Tanh => v.iter_mut().for_each(|x| *x = tanh_f(*x)),
    }
}

/// Rows `first..first + count` of a row-major weight matrix of `cols` columns, transposed.
fn weights(m: &[f32], cols: usize, first: usize, count: usize) -> Matrix<'_> {
    Matrix { data: m, offset: first * cols, rows: count, cols, row_stride: cols, col_stride: 1 }.t()
}

/// Runs a validated recurrent operator: `inputs` in the operator's order, `outputs` pre-sized.
pub fn run(op: &Op, inputs: &[(&OperandDescriptor, &[f32])], outputs: &mut [&mut [f32]]) -> Result<()> {
    let name = op.name();
    let operand =
        |k: usize| inputs.get(k).map(|(_, v)| *v).ok_or_else(|| Error::Operation(format!("{name}: no operand {k}")));
    // The optional operands present, in the order of the method's options, from index `first`.
    let optional = |first: usize, present: &[bool]| -> Result<Vec<Option<&[f32]>>> {
        optional_operands(first, present).into_iter().map(|k| k.map(operand).transpose()).collect()
    };
    let (x_descriptor, x) = *inputs.first().ok_or_else(|| Error::Operation(format!("{name}: no input")))?;
    let (w, rw) = (operand(1)?, operand(2)?);
    let gru = |layout, reset_after| match layout {
        GruWeightLayout::Zrn => Gates::Gru { z: 0, r: 1, reset_after },
        GruWeightLayout::Rzn => Gates::Gru { z: 1, r: 0, reset_after },
    };
    let lstm = |layout| match layout {
        LstmWeightLayout::Iofg => Gates::Lstm { i: 0, o: 1, f: 2, g: 3 },
        LstmWeightLayout::Ifgo => Gates::Lstm { i: 0, f: 1, g: 2, o: 3 },
    };
    use RecurrentActivation::{Sigmoid, Tanh};
    let (gates, hidden, direction, sequence, v, activations) = match op {
        Op::Gru(o) => {
            let v = optional(3, &[o.has_bias, o.has_recurrent_bias, o.has_initial_hidden_state])?;
            let a = o.activations.clone().unwrap_or(vec![Sigmoid, Tanh]);
            (
                gru(o.layout, o.reset_after),
                o.hidden_size,
                o.direction,
                o.return_sequence,
                [v[0], v[1], None, v[2], None],
                a,
            )
        }
        Op::GruCell(o) => {
            let v = optional(4, &[o.has_bias, o.has_recurrent_bias])?;
            let a = o.activations.clone().unwrap_or(vec![Sigmoid, Tanh]);
            let h = Some(operand(3)?);
            (
                gru(o.layout, o.reset_after),
                o.hidden_size,
                RecurrentDirection::Forward,
                false,
                [v[0], v[1], None, h, None],
                a,
            )
        }
        Op::Lstm(o) => {
            let present = [
                o.has_bias,
                o.has_recurrent_bias,
                o.has_peephole_weight,
                o.has_initial_hidden_state,
                o.has_initial_cell_state,
            ];
            let v = optional(3, &present)?;
            let a = o.activations.clone().unwrap_or(vec![Sigmoid, Tanh, Tanh]);
            (lstm(o.layout), o.hidden_size, o.direction, o.return_sequence, [v[0], v[1], v[2], v[3], v[4]], a)
        }
        Op::LstmCell(o) => {
            let v = optional(5, &[o.has_bias, o.has_recurrent_bias, o.has_peephole_weight])?;
            let a = o.activations.clone().unwrap_or(vec![Sigmoid, Tanh, Tanh]);
            let (h, c) = (Some(operand(3)?), Some(operand(4)?));
            (lstm(o.layout), o.hidden_size, RecurrentDirection::Forward, false, [v[0], v[1], v[2], h, c], a)
        }
        _ => return Err(Error::Operation(format!("{name} is not a recurrent operator"))),
    };
    let [bias, recurrent_bias, peephole, h0, c0] = v;
    let shape: Vec<usize> = x_descriptor.shape.iter().map(|&d| d as usize).collect();
    let (steps, batch, input_size) = match shape[..] {
        [b, i] => (1, b, i),
        [s, b, i] => (s, b, i),
        _ => return Err(Error::Operation(format!("{name}: input of rank {}", shape.len()))),
    };
    let hidden = hidden as usize;
    let dirs = if direction == RecurrentDirection::Both { 2 } else { 1 };
    let (count, is_lstm) = match gates {
        Gates::Gru { .. } => (3, false),
        Gates::Lstm { .. } => (4, true),
    };
    let act = |k: usize| activations.get(k).copied().ok_or_else(|| Error::Operation(format!("{name}: activations")));
    let rows = count * hidden;
    let state = batch * hidden;
    // Every length the loops index by, so that none can panic.
    let sizes = [
        (Some(x), steps * batch * input_size),
        (Some(w), dirs * rows * input_size),
        (Some(rw), dirs * rows * hidden),
        (bias, dirs * rows),
        (recurrent_bias, dirs * rows),
        (peephole, dirs * 3 * hidden),
        (h0, dirs * state),
        (c0, dirs * state),
    ];
    let expected_outputs = 1 + is_lstm as usize + sequence as usize;
    if sizes.iter().any(|(v, n)| v.is_some_and(|v| v.len() != *n))
        || outputs.len() != expected_outputs
        || outputs.iter().take(1 + is_lstm as usize).any(|o| o.len() != dirs * state)
        || (sequence && outputs[expected_outputs - 1].len() != steps * dirs * state)
    {
        return Err(Error::Operation(format!("{name}: operand lengths differ from their shapes")));
    }
    let mut projected = vec![0f32; steps * batch * rows];
    let mut recurrent = vec![0f32; batch * rows];
    let mut h = vec![0f32; state];
    let mut c = vec![0f32; state];
    let mut scratch = vec![0f32; state];
    let mut sequence_values = if sequence { vec![0f32; steps * dirs * state] } else { Vec::new() };
    let (mut final_h, mut final_c) = (vec![0f32; dirs * state], vec![0f32; dirs * state]);
    for d in 0..dirs {
        let backward = d == 1 || direction == RecurrentDirection::Backward;
        // (bias + recurrentBias) of every row, but gru with resetAfter adds the new gate's
        // recurrent bias to the recurrent product, inside the reset gate's product.
        let mut row_bias = vec![0f32; rows];
        for (row, b) in row_bias.iter_mut().enumerate() {
            let in_n = matches!(gates, Gates::Gru { reset_after: true, .. }) && row / hidden == N_GATE;
            let at = |v: Option<&[f32]>| v.map_or(0.0, |v| v[d * rows + row]);
            *b = at(bias) + if in_n { 0.0 } else { at(recurrent_bias) };
        }
        for r in projected.chunks_exact_mut(rows) {
            r.copy_from_slice(&row_bias);
        }
        gemm(
            Matrix::row_major(x, steps * batch, input_size),
            weights(w, input_size, d * rows, rows),
            1.0,
            &mut projected,
            rows,
            true,
        )?;
        let initial = |v: Option<&[f32]>, s: &mut [f32]| match v {
            Some(v) => s.copy_from_slice(&v[d * state..(d + 1) * state]),
            None => s.fill(0.0),
        };
        initial(h0, &mut h);
        initial(c0, &mut c);
        let recurrent_n = |v: Option<&[f32]>, u: usize| v.map_or(0.0, |v| v[d * rows + N_GATE * hidden + u]);
        for step in 0..steps {
            let t = if backward { steps - 1 - step } else { step };
            let xt = &projected[t * batch * rows..(t + 1) * batch * rows];
            match gates {
                Gates::Lstm { i, o, f, g } => {
                    gemm(
                        Matrix::row_major(&h, batch, hidden),
                        weights(rw, hidden, d * rows, rows),
                        1.0,
                        &mut recurrent,
                        rows,
                        false,
                    )?;
                    for b in 0..batch {
                        let pre = &mut recurrent[b * rows..(b + 1) * rows];
                        pre.iter_mut().zip(&xt[b * rows..(b + 1) * rows]).for_each(|(p, &x)| *p += x);
                        let cb = &mut c[b * hidden..(b + 1) * hidden];
                        if let Some(p) = peephole {
                            // Peephole weights are ordered input, output, forget; each reads the
                            // cell state before the step.
                            let p = &p[d * 3 * hidden..(d + 1) * 3 * hidden];
                            for (gate, k) in [(i, 0), (o, 1), (f, 2)] {
                                let run = &mut pre[gate * hidden..(gate + 1) * hidden];
                                let weights = &p[k * hidden..(k + 1) * hidden];
                                run.iter_mut().zip(weights).zip(cb.iter()).for_each(|((v, &w), &c)| *v += w * c);
                            }
                        }
                        for gate in [i, o, f] {
                            apply(act(0)?, &mut pre[gate * hidden..(gate + 1) * hidden]);
                        }
                        apply(act(1)?, &mut pre[g * hidden..(g + 1) * hidden]);
                        let (gi, gf, gg) = (&pre[i * hidden..], &pre[f * hidden..], &pre[g * hidden..]);
                        for (u, cu) in cb.iter_mut().enumerate() {
                            *cu = gf[u] * *cu + gi[u] * gg[u];
                        }
                        let tanh_c = &mut scratch[..hidden];
                        tanh_c.copy_from_slice(cb);
                        apply(act(2)?, tanh_c);
                        let go = &pre[o * hidden..(o + 1) * hidden];
                        h[b * hidden..(b + 1) * hidden]
                            .iter_mut()
                            .zip(go)
                            .zip(tanh_c.iter())
                            .for_each(|((h, &o), &t)| *h = o * t);
                    }
                }
                Gates::Gru { z, r, reset_after } => {
                    let n = N_GATE * hidden;
                    if reset_after {
                        gemm(
                            Matrix::row_major(&h, batch, hidden),
                            weights(rw, hidden, d * rows, rows),
                            1.0,
                            &mut recurrent,
                            rows,
                            false,
                        )?;
                    } else {
                        // The z and r rows (the first two in both layouts), then the new gate's
                        // product of the reset hidden state.
                        gemm(
                            Matrix::row_major(&h, batch, hidden),
                            weights(rw, hidden, d * rows, n),
                            1.0,
                            &mut recurrent,
                            rows,
                            false,
                        )?;
                        for b in 0..batch {
                            let pre = &mut recurrent[b * rows..(b + 1) * rows];
                            let reset = &mut pre[r * hidden..(r + 1) * hidden];
                            reset.iter_mut().zip(&xt[b * rows + r * hidden..]).for_each(|(p, &x)| *p += x);
                            apply(act(0)?, reset);
                            let hb = &h[b * hidden..(b + 1) * hidden];
                            scratch[b * hidden..(b + 1) * hidden]
                                .iter_mut()
                                .zip(reset.iter())
                                .zip(hb)
                                .for_each(|((s, &r), &h)| *s = r * h);
                        }
                        gemm(
                            Matrix::row_major(&scratch, batch, hidden),
                            weights(rw, hidden, d * rows + n, hidden),
                            1.0,
                            &mut recurrent[n..],
                            rows,
                            false,
                        )?;
                    }
                    for b in 0..batch {
                        let pre = &mut recurrent[b * rows..(b + 1) * rows];
                        let xb = &xt[b * rows..(b + 1) * rows];
                        let update = &mut pre[z * hidden..(z + 1) * hidden];
                        update.iter_mut().zip(&xb[z * hidden..]).for_each(|(p, &x)| *p += x);
                        apply(act(0)?, update);
                        if reset_after {
                            let reset = &mut pre[r * hidden..(r + 1) * hidden];
                            reset.iter_mut().zip(&xb[r * hidden..]).for_each(|(p, &x)| *p += x);
                            apply(act(0)?, reset);
                            for u in 0..hidden {
                                pre[n + u] =
                                    xb[n + u] + pre[r * hidden + u] * (recurrent_n(recurrent_bias, u) + pre[n + u]);
                            }
                        } else {
                            pre[n..].iter_mut().zip(&xb[n..]).for_each(|(p, &x)| *p += x);
                        }
                        apply(act(1)?, &mut pre[n..n + hidden]);
                        let hb = &mut h[b * hidden..(b + 1) * hidden];
                        for (u, hu) in hb.iter_mut().enumerate() {
                            let (zu, nu) = (pre[z * hidden + u], pre[n + u]);
                            *hu = zu * *hu + nu * (1.0 - zu);
                        }
                    }
                }
            }
            if sequence {
                // [steps, directions, batch, hidden], in time order for both directions.
                let at = (t * dirs + d) * state;
                sequence_values[at..at + state].copy_from_slice(&h);
            }
        }
        final_h[d * state..(d + 1) * state].copy_from_slice(&h);
        final_c[d * state..(d + 1) * state].copy_from_slice(&c);
    }
    let mut results = vec![final_h];
    if is_lstm {
        results.push(final_c);
    }
    if sequence {
        results.push(sequence_values);
    }
    for (out, values) in outputs.iter_mut().zip(results) {
        out.copy_from_slice(&values);
    }
    Ok(())
}
