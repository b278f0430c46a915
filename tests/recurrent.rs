//! gru, gruCell, lstm and lstmCell: the GPU against the float64 reference over every
//! combination of the optional operands, with every direction, weight layout and resetAfter,
//! random activations and shapes, in float32 and float16; WPT's 3 ULP budget on well-conditioned
//! operands; hand-computed cells (gate order in every layout); the backward
//! direction as the forward one over the reversed sequence (checked on the GPU alone); and the
//! spec's validation errors and output shapes.
#![cfg(not(target_arch = "wasm32"))] // native: `wasm-pack test` builds every test target for wasm32

mod common;
use common::*;
use webnn_wgpu::graph::{DataType, OperandDescriptor};
use webnn_wgpu::ops::recurrent::*;
use webnn_wgpu::ops::{self, HostTensor, Op};
use webnn_wgpu::Error;

const DIRECTIONS: [RecurrentDirection; 3] =
    [RecurrentDirection::Forward, RecurrentDirection::Backward, RecurrentDirection::Both];
const ACTIVATIONS: [RecurrentActivation; 3] =
    [RecurrentActivation::Relu, RecurrentActivation::Sigmoid, RecurrentActivation::Tanh];

fn tolerance(data_type: DataType) -> (u64, f64) {
    match data_type {
        DataType::Float16 => (4, 4e-3),
        _ => (64, 2e-5),
    }
}

/// Random activations (`None` half the time: the defaults).
fn activations(rng: &mut Rng, count: usize) -> Option<Vec<RecurrentActivation>> {
    (rng.below(2) == 0).then(|| (0..count).map(|_| ACTIVATIONS[rng.below(3) as usize]).collect())
}

struct Shapes {
    steps: u32,
    batch: u32,
    input_size: u32,
    hidden: u32,
}

fn shapes(rng: &mut Rng) -> Shapes {
    Shapes { steps: 1 + rng.below(4), batch: 1 + rng.below(3), input_size: 1 + rng.below(5), hidden: 1 + rng.below(5) }
}

#[test]
fn gru_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(61);
    for data_type in [DataType::Float32, DataType::Float16] {
        for direction in DIRECTIONS {
            for layout in [GruWeightLayout::Zrn, GruWeightLayout::Rzn] {
                for reset_after in [true, false] {
                    for mask in 0..8u32 {
                        let s = shapes(&mut rng);
                        let dirs = if direction == RecurrentDirection::Both { 2 } else { 1 };
                        let options = GruOptions {
                            has_bias: mask & 1 != 0,
                            has_recurrent_bias: mask & 2 != 0,
                            has_initial_hidden_state: mask & 4 != 0,
                            reset_after,
                            return_sequence: rng.below(2) == 0,
                            direction,
                            layout,
                            activations: activations(&mut rng, 2),
                            ..GruOptions::new(s.steps, s.hidden)
                        };
                        let g = 3 * s.hidden;
                        let mut inputs = vec![
                            rng.tensor(data_type, &[s.steps, s.batch, s.input_size], -1.0, 1.0),
                            rng.tensor(data_type, &[dirs, g, s.input_size], -0.7, 0.7),
                            rng.tensor(data_type, &[dirs, g, s.hidden], -0.7, 0.7),
                        ];
                        if options.has_bias {
                            inputs.push(rng.tensor(data_type, &[dirs, g], -0.5, 0.5));
                        }
                        if options.has_recurrent_bias {
                            inputs.push(rng.tensor(data_type, &[dirs, g], -0.5, 0.5));
                        }
                        if options.has_initial_hidden_state {
                            inputs.push(rng.tensor(data_type, &[dirs, s.batch, s.hidden], -1.0, 1.0));
                        }
                        let (ulp, abs) = tolerance(data_type);
                        check_op(&ctx, &Op::Gru(options), &inputs, ulp, abs);
                    }
                }
            }
        }
    }
}

#[test]
fn lstm_matches_reference() {
    let ctx = context();
    let mut rng = Rng::new(62);
    for data_type in [DataType::Float32, DataType::Float16] {
        for direction in DIRECTIONS {
            for layout in [LstmWeightLayout::Iofg, LstmWeightLayout::Ifgo] {
                for mask in 0..32u32 {
                    let s = shapes(&mut rng);
                    let dirs = if direction == RecurrentDirection::Both { 2 } else { 1 };
                    let options = LstmOptions {
                        has_bias: mask & 1 != 0,
                        has_recurrent_bias: mask & 2 != 0,
                        has_peephole_weight: mask & 4 != 0,
                        has_initial_hidden_state: mask & 8 != 0,
                        has_initial_cell_state: mask & 16 != 0,
                        return_sequence: rng.below(2) == 0,
                        direction,
                        layout,
                        activations: activations(&mut rng, 3),
                        ..LstmOptions::new(s.steps, s.hidden)
                    };
                    let g = 4 * s.hidden;
                    let mut inputs = vec![
                        rng.tensor(data_type, &[s.steps, s.batch, s.input_size], -1.0, 1.0),
                        rng.tensor(data_type, &[dirs, g, s.input_size], -0.7, 0.7),
                        rng.tensor(data_type, &[dirs, g, s.hidden], -0.7, 0.7),
                    ];
                    for (present, shape) in [
                        (options.has_bias, vec![dirs, g]),
                        (options.has_recurrent_bias, vec![dirs, g]),
                        (options.has_peephole_weight, vec![dirs, 3 * s.hidden]),
                        (options.has_initial_hidden_state, vec![dirs, s.batch, s.hidden]),
                        (options.has_initial_cell_state, vec![dirs, s.batch, s.hidden]),
                    ] {
                        if present {
                            inputs.push(rng.tensor(data_type, &shape, -0.8, 0.8));
                        }
                    }
                    let (ulp, abs) = tolerance(data_type);
                    check_op(&ctx, &Op::Lstm(options), &inputs, ulp, abs);
                }
            }
        }
    }
}

#[test]
fn cells_match_reference() {
    let ctx = context();
    let mut rng = Rng::new(63);
    for data_type in [DataType::Float32, DataType::Float16] {
        for layout in [GruWeightLayout::Zrn, GruWeightLayout::Rzn] {
            for reset_after in [true, false] {
                for mask in 0..4u32 {
                    let s = shapes(&mut rng);
                    let options = GruCellOptions {
                        has_bias: mask & 1 != 0,
                        has_recurrent_bias: mask & 2 != 0,
                        reset_after,
                        layout,
                        activations: activations(&mut rng, 2),
                        ..GruCellOptions::new(s.hidden)
                    };
                    let g = 3 * s.hidden;
                    let mut inputs = vec![
                        rng.tensor(data_type, &[s.batch, s.input_size], -1.0, 1.0),
                        rng.tensor(data_type, &[g, s.input_size], -0.7, 0.7),
                        rng.tensor(data_type, &[g, s.hidden], -0.7, 0.7),
                        rng.tensor(data_type, &[s.batch, s.hidden], -1.0, 1.0),
                    ];
                    for present in [options.has_bias, options.has_recurrent_bias] {
                        if present {
                            inputs.push(rng.tensor(data_type, &[g], -0.5, 0.5));
                        }
                    }
                    let (ulp, abs) = tolerance(data_type);
                    check_op(&ctx, &Op::GruCell(options), &inputs, ulp, abs);
                }
            }
        }
        for layout in [LstmWeightLayout::Iofg, LstmWeightLayout::Ifgo] {
            for mask in 0..8u32 {
                let s = shapes(&mut rng);
                let options = LstmCellOptions {
                    has_bias: mask & 1 != 0,
                    has_recurrent_bias: mask & 2 != 0,
                    has_peephole_weight: mask & 4 != 0,
                    layout,
                    activations: activations(&mut rng, 3),
                    ..LstmCellOptions::new(s.hidden)
                };
                let g = 4 * s.hidden;
                let mut inputs = vec![
                    rng.tensor(data_type, &[s.batch, s.input_size], -1.0, 1.0),
                    rng.tensor(data_type, &[g, s.input_size], -0.7, 0.7),
                    rng.tensor(data_type, &[g, s.hidden], -0.7, 0.7),
                    rng.tensor(data_type, &[s.batch, s.hidden], -1.0, 1.0),
                    rng.tensor(data_type, &[s.batch, s.hidden], -1.0, 1.0),
                ];
                for (present, size) in
                    [(options.has_bias, g), (options.has_recurrent_bias, g), (options.has_peephole_weight, 3 * s.hidden)]
                {
                    if present {
                        inputs.push(rng.tensor(data_type, &[size], -0.5, 0.5));
                    }
                }
                let (ulp, abs) = tolerance(data_type);
                check_op(&ctx, &Op::LstmCell(options), &inputs, ulp, abs);
            }
        }
    }
}

fn tensor(shape: &[u32], data: Vec<f64>) -> HostTensor {
    HostTensor::new(OperandDescriptor::new(DataType::Float32, shape.to_vec()), data).unwrap()
}

fn zeros(shape: &[u32]) -> HostTensor {
    tensor(shape, vec![0.0; shape.iter().product::<u32>() as usize])
}

/// Zero weights: every gate sees only its bias. gruCell with zero biases has z = r = 1/2 and
/// n = 0, so h' = h / 2; lstmCell with a forget-gate bias b_f and a cell-gate bias b_g has
/// i = o = 1/2, f = sigmoid(b_f), g = tanh(b_g).
#[test]
fn cells_by_hand() {
    let ctx = context();
    let h = tensor(&[1, 2], vec![0.8, -0.4]);
    let gru = run_op(
        &ctx,
        &Op::GruCell(GruCellOptions::new(2)),
        &[zeros(&[1, 3]), zeros(&[6, 3]), zeros(&[6, 2]), h.clone()],
        &[false; 4],
    )
    .unwrap();
    assert_eq!(gru[0].data, vec![0.4, -0.2].iter().map(|&v: &f64| v as f32 as f64).collect::<Vec<_>>());
    // iofg layout: the bias rows are i, o, f, g.
    let (bf, bg) = (1.0f64, 0.5f64);
    let bias = tensor(&[8], vec![0.0, 0.0, 0.0, 0.0, bf, bf, bg, bg]);
    let c = tensor(&[1, 2], vec![0.6, -1.0]);
    let options = LstmCellOptions { has_bias: true, ..LstmCellOptions::new(2) };
    let lstm = run_op(
        &ctx,
        &Op::LstmCell(options),
        &[zeros(&[1, 3]), zeros(&[8, 3]), zeros(&[8, 2]), h, c.clone(), bias],
        &[false; 6],
    )
    .unwrap();
    let f = 1.0 / (1.0 + (-bf).exp());
    for u in 0..2 {
        let cn = f * c.data[u] + 0.5 * bg.tanh();
        let hn = 0.5 * cn.tanh();
        assert!((lstm[1].data[u] - cn).abs() < 1e-6, "cell {u}: {} vs {cn}", lstm[1].data[u]);
        assert!((lstm[0].data[u] - hn).abs() < 1e-6, "hidden {u}: {} vs {hn}", lstm[0].data[u]);
    }
}

/// "backward" over a sequence equals "forward" over the time-reversed sequence, with the
/// returned sequence reversed too; and "both" stacks the two. Compared on the GPU alone.
#[test]
fn backward_is_forward_reversed() {
    let ctx = context();
    let mut rng = Rng::new(64);
    let (steps, batch, input_size, hidden) = (4u32, 2u32, 3u32, 3u32);
    let input = rng.tensor(DataType::Float32, &[steps, batch, input_size], -1.0, 1.0);
    let step_len = (batch * input_size) as usize;
    let mut reversed = input.clone();
    for t in 0..steps as usize {
        let src = (steps as usize - 1 - t) * step_len;
        reversed.data[t * step_len..(t + 1) * step_len].copy_from_slice(&input.data[src..src + step_len]);
    }
    let weight = rng.tensor(DataType::Float32, &[1, 4 * hidden, input_size], -0.7, 0.7);
    let recurrent = rng.tensor(DataType::Float32, &[1, 4 * hidden, hidden], -0.7, 0.7);
    let run = |direction, x: &HostTensor| {
        let options = LstmOptions { return_sequence: true, direction, ..LstmOptions::new(steps, hidden) };
        run_op(&ctx, &Op::Lstm(options), &[x.clone(), weight.clone(), recurrent.clone()], &[false; 3]).unwrap()
    };
    let backward = run(RecurrentDirection::Backward, &input);
    let forward = run(RecurrentDirection::Forward, &reversed);
    assert_eq!(backward[0].data, forward[0].data);
    assert_eq!(backward[1].data, forward[1].data);
    let state = (batch * hidden) as usize;
    for t in 0..steps as usize {
        let r = steps as usize - 1 - t;
        assert_eq!(backward[2].data[t * state..(t + 1) * state], forward[2].data[r * state..(r + 1) * state], "step {t}");
    }
    // "both" with the same weights in each direction: direction 0 is forward over `input`.
    let stack = |t: &HostTensor| {
        let mut both = t.clone();
        both.descriptor.shape[0] = 2;
        both.data.extend_from_slice(&t.data);
        both
    };
    let options = LstmOptions { return_sequence: true, direction: RecurrentDirection::Both, ..LstmOptions::new(steps, hidden) };
    let both = run_op(&ctx, &Op::Lstm(options), &[input.clone(), stack(&weight), stack(&recurrent)], &[false; 3]).unwrap();
    let plain = run(RecurrentDirection::Forward, &input);
    assert_eq!(both[0].data[..state], plain[0].data[..]);
    assert_eq!(both[0].data[state..], backward[0].data[..]);
    for t in 0..steps as usize {
        let row = &both[2].data[t * 2 * state..(t + 1) * 2 * state];
        assert_eq!(row[..state], plain[2].data[t * state..(t + 1) * state]);
        assert_eq!(row[state..], backward[2].data[t * state..(t + 1) * state]);
    }
}

fn d(shape: &[u32]) -> OperandDescriptor {
    OperandDescriptor::new(DataType::Float32, shape.to_vec())
}

fn type_error(op: Op, inputs: &[OperandDescriptor]) -> bool {
    let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
    matches!(ops::validate(&op, &refs), Err(Error::Type(_)))
}

#[test]
fn recurrent_output_shapes() {
    let shapes = |op: Op, inputs: &[OperandDescriptor]| -> Vec<Vec<u32>> {
        let refs: Vec<&OperandDescriptor> = inputs.iter().collect();
        ops::validate(&op, &refs).unwrap().into_iter().map(|o| o.shape).collect()
    };
    let both = GruOptions { direction: RecurrentDirection::Both, return_sequence: true, ..GruOptions::new(5, 4) };
    assert_eq!(shapes(Op::Gru(both), &[d(&[5, 2, 3]), d(&[2, 12, 3]), d(&[2, 12, 4])]), vec![vec![2, 2, 4], vec![5, 2, 2, 4]]);
    assert_eq!(shapes(Op::Gru(GruOptions::new(5, 4)), &[d(&[5, 2, 3]), d(&[1, 12, 3]), d(&[1, 12, 4])]), vec![vec![1, 2, 4]]);
    let lstm = LstmOptions { return_sequence: true, ..LstmOptions::new(5, 4) };
    assert_eq!(
        shapes(Op::Lstm(lstm), &[d(&[5, 2, 3]), d(&[1, 16, 3]), d(&[1, 16, 4])]),
        vec![vec![1, 2, 4], vec![1, 2, 4], vec![5, 1, 2, 4]]
    );
    assert_eq!(
        shapes(Op::Lstm(LstmOptions::new(5, 4)), &[d(&[5, 2, 3]), d(&[1, 16, 3]), d(&[1, 16, 4])]),
        vec![vec![1, 2, 4], vec![1, 2, 4]]
    );
    assert_eq!(shapes(Op::GruCell(GruCellOptions::new(4)), &[d(&[2, 3]), d(&[12, 3]), d(&[12, 4]), d(&[2, 4])]), vec![vec![2, 4]]);
    assert_eq!(
        shapes(Op::LstmCell(LstmCellOptions::new(4)), &[d(&[2, 3]), d(&[16, 3]), d(&[16, 4]), d(&[2, 4]), d(&[2, 4])]),
        vec![vec![2, 4], vec![2, 4]]
    );
}

#[test]
fn recurrent_validation() {
    let half = |shape: &[u32]| OperandDescriptor::new(DataType::Float16, shape.to_vec());
    let int = |shape: &[u32]| OperandDescriptor::new(DataType::Int32, shape.to_vec());
    let gru = GruOptions::new(5, 4);
    let gru_in = vec![d(&[5, 2, 3]), d(&[1, 12, 3]), d(&[1, 12, 4])];
    assert!(!type_error(Op::Gru(gru.clone()), &gru_in));
    let with = |extra: Vec<OperandDescriptor>| [gru_in.clone(), extra].concat();
    let cases: Vec<(&str, GruOptions, Vec<OperandDescriptor>)> = vec![
        ("int input", gru.clone(), vec![int(&[5, 2, 3]), d(&[1, 12, 3]), d(&[1, 12, 4])]),
        ("half weight", gru.clone(), vec![d(&[5, 2, 3]), half(&[1, 12, 3]), d(&[1, 12, 4])]),
        ("input rank", gru.clone(), vec![d(&[5, 2]), d(&[1, 12, 3]), d(&[1, 12, 4])]),
        ("steps mismatch", GruOptions::new(4, 4), gru_in.clone()),
        ("zero steps", GruOptions::new(0, 4), gru_in.clone()),
        ("zero hidden size", GruOptions::new(5, 0), gru_in.clone()),
        ("weight shape", gru.clone(), vec![d(&[5, 2, 3]), d(&[1, 12, 4]), d(&[1, 12, 4])]),
        ("recurrent weight shape", gru.clone(), vec![d(&[5, 2, 3]), d(&[1, 12, 3]), d(&[1, 12, 3])]),
        ("both needs 2 directions", GruOptions { direction: RecurrentDirection::Both, ..gru.clone() }, gru_in.clone()),
        ("bias shape", GruOptions { has_bias: true, ..gru.clone() }, with(vec![d(&[1, 8])])),
        ("bias type", GruOptions { has_bias: true, ..gru.clone() }, with(vec![half(&[1, 12])])),
        ("recurrent bias shape", GruOptions { has_recurrent_bias: true, ..gru.clone() }, with(vec![d(&[12])])),
        ("initial hidden state shape", GruOptions { has_initial_hidden_state: true, ..gru.clone() }, with(vec![d(&[1, 3, 4])])),
        (
            "one activation",
            GruOptions { activations: Some(vec![RecurrentActivation::Tanh]), ..gru.clone() },
            gru_in.clone(),
        ),
        ("missing bias operand", GruOptions { has_bias: true, ..gru.clone() }, gru_in.clone()),
        ("hidden size too large", GruOptions::new(5, 1 << 29), gru_in.clone()),
    ];
    for (what, options, inputs) in cases {
        assert!(type_error(Op::Gru(options), &inputs), "gru {what}");
    }

    let lstm = LstmOptions::new(5, 4);
    let lstm_in = vec![d(&[5, 2, 3]), d(&[1, 16, 3]), d(&[1, 16, 4])];
    assert!(!type_error(Op::Lstm(lstm.clone()), &lstm_in));
    let with = |extra: Vec<OperandDescriptor>| [lstm_in.clone(), extra].concat();
    let cases: Vec<(&str, LstmOptions, Vec<OperandDescriptor>)> = vec![
        ("zero steps", LstmOptions::new(0, 4), lstm_in.clone()),
        ("weight shape", lstm.clone(), vec![d(&[5, 2, 3]), d(&[1, 12, 3]), d(&[1, 16, 4])]),
        ("peephole shape", LstmOptions { has_peephole_weight: true, ..lstm.clone() }, with(vec![d(&[1, 16])])),
        ("initial cell state shape", LstmOptions { has_initial_cell_state: true, ..lstm.clone() }, with(vec![d(&[2, 2, 4])])),
        (
            "two activations",
            LstmOptions { activations: Some(vec![RecurrentActivation::Tanh; 2]), ..lstm.clone() },
            lstm_in.clone(),
        ),
        ("hidden size too large", LstmOptions::new(5, 1 << 28), lstm_in.clone()),
    ];
    for (what, options, inputs) in cases {
        assert!(type_error(Op::Lstm(options), &inputs), "lstm {what}");
    }

    let cell_in = vec![d(&[2, 3]), d(&[12, 3]), d(&[12, 4]), d(&[2, 4])];
    assert!(!type_error(Op::GruCell(GruCellOptions::new(4)), &cell_in));
    assert!(type_error(Op::GruCell(GruCellOptions::new(4)), &[d(&[2, 3]), d(&[12, 3]), d(&[12, 4]), d(&[3, 4])]), "gruCell hidden state shape");
    assert!(type_error(Op::GruCell(GruCellOptions::new(4)), &[d(&[2, 3]), d(&[12, 3]), d(&[12, 4]), half(&[2, 4])]), "gruCell hidden state type");
    let lstm_cell_in = vec![d(&[2, 3]), d(&[16, 3]), d(&[16, 4]), d(&[2, 4]), d(&[2, 4])];
    assert!(!type_error(Op::LstmCell(LstmCellOptions::new(4)), &lstm_cell_in));
    assert!(type_error(Op::LstmCell(LstmCellOptions::new(4)), &[d(&[2, 3]), d(&[16, 3]), d(&[16, 4]), d(&[2, 4]), d(&[2, 5])]), "lstmCell cell state shape");
    let peep = LstmCellOptions { has_peephole_weight: true, ..LstmCellOptions::new(4) };
    assert!(type_error(Op::LstmCell(peep), &[lstm_cell_in.clone(), vec![d(&[16])]].concat()), "lstmCell peephole shape");
}

/// WPT's budgets (gru, gruCell, lstm 3 ULP) against the float64 reference, on operands in
/// [0, scale) so that no sum cancels: small scales put the tanh arguments near 0, where
/// `(1 - e^-2x) / (1 + e^-2x)` loses most digits, and gru's `1 - z` near 0.
#[test]
fn within_wpt_budget() {
    let ctx = context();
    let mut rng = Rng::new(65);
    for scale in [0.01, 0.1, 1.0] {
        for case in 0..6u32 {
            let (steps, batch, isz, hid) = (1 + rng.below(3), 1 + rng.below(3), 1 + rng.below(4), 1 + rng.below(4));
            let mut t = |shape: &[u32]| rng.tensor(DataType::Float32, shape, 0.0, scale);
            let (l, g) = (4 * hid, 3 * hid);
            let lstm = LstmOptions {
                has_bias: true,
                has_recurrent_bias: true,
                has_peephole_weight: true,
                has_initial_hidden_state: true,
                has_initial_cell_state: true,
                return_sequence: true,
                layout: if case % 2 == 0 { LstmWeightLayout::Iofg } else { LstmWeightLayout::Ifgo },
                ..LstmOptions::new(steps, hid)
            };
            let inputs = [t(&[steps, batch, isz]), t(&[1, l, isz]), t(&[1, l, hid]), t(&[1, l]), t(&[1, l]), t(&[1, 3 * hid]), t(&[1, batch, hid]), t(&[1, batch, hid])];
            check_op(&ctx, &Op::Lstm(lstm), &inputs, 3, 0.0);
            let cell = LstmCellOptions { has_bias: true, has_recurrent_bias: true, has_peephole_weight: true, ..LstmCellOptions::new(hid) };
            let inputs = [t(&[batch, isz]), t(&[l, isz]), t(&[l, hid]), t(&[batch, hid]), t(&[batch, hid]), t(&[l]), t(&[l]), t(&[3 * hid])];
            // WPT allows lstmCell 1 ULP on its own data; on random data o * tanh(c) takes up to 2 here.
            check_op(&ctx, &Op::LstmCell(cell), &inputs, 3, 0.0);
            let gru = GruOptions {
                has_bias: true,
                has_recurrent_bias: true,
                has_initial_hidden_state: true,
                return_sequence: true,
                reset_after: case % 2 == 0,
                layout: if case % 3 == 0 { GruWeightLayout::Zrn } else { GruWeightLayout::Rzn },
                ..GruOptions::new(steps, hid)
            };
            let inputs = [t(&[steps, batch, isz]), t(&[1, g, isz]), t(&[1, g, hid]), t(&[1, g]), t(&[1, g]), t(&[1, batch, hid])];
            check_op(&ctx, &Op::Gru(gru), &inputs, 3, 0.0);
            let cell = GruCellOptions { has_bias: true, has_recurrent_bias: true, reset_after: case % 2 == 1, ..GruCellOptions::new(hid) };
            let inputs = [t(&[batch, isz]), t(&[g, isz]), t(&[g, hid]), t(&[batch, hid]), t(&[g]), t(&[g])];
            check_op(&ctx, &Op::GruCell(cell), &inputs, 3, 0.0);
        }
    }
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// Weights whose every gate row differs (row k of `rows` is `base + k`-dependent), so that
/// any two swapped gates change the result.
fn distinct(rows: u32, cols: u32, base: f64) -> Vec<f64> {
    (0..rows * cols).map(|k| base * (1.0 + (k / cols) as f64) * if k % 2 == 0 { 1.0 } else { -0.5 } + 0.01 * k as f64).collect()
}

/// `x · row` of a row-major `[rows, cols]` matrix.
fn row_dot(m: &[f64], cols: usize, row: usize, x: &[f64]) -> f64 {
    (0..cols).map(|k| m[row * cols + k] * x[k]).sum()
}

/// One lstmCell step written out from the spec's emulation, for batch 1; `order` names the
/// gate of each row block (e.g. "iofg").
fn lstm_step(order: &str, x: &[f64], w: &[f64], r: &[f64], b: &[f64], h: &[f64], c: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let hid = h.len();
    let block = |gate: char| order.find(gate).unwrap() * hid;
    let pre = |gate: char, u: usize| {
        let row = block(gate) + u;
        b[row] + row_dot(w, x.len(), row, x) + row_dot(r, hid, row, h)
    };
    let (mut h1, mut c1) = (vec![0.0; hid], vec![0.0; hid]);
    for u in 0..hid {
        let i = sigmoid(pre('i', u));
        let f = sigmoid(pre('f', u));
        let g = pre('g', u).tanh();
        let o = sigmoid(pre('o', u));
        c1[u] = f * c[u] + i * g;
        h1[u] = o * c1[u].tanh();
    }
    (h1, c1)
}

/// One gruCell step written out from the spec's emulation, for batch 1.
fn gru_step(order: &str, reset_after: bool, x: &[f64], w: &[f64], r: &[f64], b: &[f64], h: &[f64]) -> Vec<f64> {
    let hid = h.len();
    let block = |gate: char| order.find(gate).unwrap() * hid;
    let xw = |gate: char, u: usize| row_dot(w, x.len(), block(gate) + u, x);
    let hr = |gate: char, u: usize, h: &[f64]| row_dot(r, hid, block(gate) + u, h);
    let bias = |gate: char, u: usize| b[block(gate) + u];
    let z: Vec<f64> = (0..hid).map(|u| sigmoid(bias('z', u) + xw('z', u) + hr('z', u, h))).collect();
    let rg: Vec<f64> = (0..hid).map(|u| sigmoid(bias('r', u) + xw('r', u) + hr('r', u, h))).collect();
    let rh: Vec<f64> = (0..hid).map(|u| rg[u] * h[u]).collect();
    (0..hid)
        .map(|u| {
            let n = if reset_after {
                (bias('n', u) + xw('n', u) + rg[u] * hr('n', u, h)).tanh()
            } else {
                (bias('n', u) + xw('n', u) + hr('n', u, &rh)).tanh()
            };
            z[u] * h[u] + n * (1.0 - z[u])
        })
        .collect()
}

fn assert_near(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{what}[{k}]: {g} vs hand-computed {w}");
    }
}

/// Gate order: lstmCell, lstm (2 steps), gruCell and gru (2 steps) in both layouts (and both
/// resetAfter for gru) against cells written out in the test, with distinct non-zero weights
/// for every gate, so that swapping i/o/f/g or z/r would fail.
#[test]
fn gate_order_by_hand() {
    let ctx = context();
    let hid = 2usize;
    let x0 = vec![0.7, -0.4];
    let x1 = vec![-0.3, 0.9];
    let h = vec![0.2, -0.6];
    let c = vec![-0.5, 0.8];
    for (layout, order) in [(LstmWeightLayout::Iofg, "iofg"), (LstmWeightLayout::Ifgo, "ifgo")] {
        let rows = 4 * hid as u32;
        let (w, r, b) = (distinct(rows, 2, 0.3), distinct(rows, 2, -0.2), distinct(rows, 1, 0.15));
        let cell = LstmCellOptions { has_bias: true, layout, ..LstmCellOptions::new(hid as u32) };
        let got = run_op(
            &ctx,
            &Op::LstmCell(cell),
            &[tensor(&[1, 2], x0.clone()), tensor(&[rows, 2], w.clone()), tensor(&[rows, 2], r.clone()), tensor(&[1, 2], h.clone()), tensor(&[1, 2], c.clone()), tensor(&[rows], b.clone())],
            &[false; 6],
        )
        .unwrap();
        let (h1, c1) = lstm_step(order, &x0, &w, &r, &b, &h, &c);
        assert_near(&got[0].data, &h1, &format!("lstmCell {order} hidden"));
        assert_near(&got[1].data, &c1, &format!("lstmCell {order} cell"));
        let net = LstmOptions { has_bias: true, has_initial_hidden_state: true, has_initial_cell_state: true, layout, ..LstmOptions::new(2, hid as u32) };
        let got = run_op(
            &ctx,
            &Op::Lstm(net),
            &[
                tensor(&[2, 1, 2], [x0.clone(), x1.clone()].concat()),
                tensor(&[1, rows, 2], w.clone()),
                tensor(&[1, rows, 2], r.clone()),
                tensor(&[1, rows], b.clone()),
                tensor(&[1, 1, 2], h.clone()),
                tensor(&[1, 1, 2], c.clone()),
            ],
            &[false; 6],
        )
        .unwrap();
        let (h2, c2) = lstm_step(order, &x1, &w, &r, &b, &h1, &c1);
        assert_near(&got[0].data, &h2, &format!("lstm {order} hidden"));
        assert_near(&got[1].data, &c2, &format!("lstm {order} cell"));
    }
    for (layout, order) in [(GruWeightLayout::Zrn, "zrn"), (GruWeightLayout::Rzn, "rzn")] {
        for reset_after in [true, false] {
            let rows = 3 * hid as u32;
            let (w, r, b) = (distinct(rows, 2, 0.3), distinct(rows, 2, -0.25), distinct(rows, 1, 0.2));
            let cell = GruCellOptions { has_bias: true, reset_after, layout, ..GruCellOptions::new(hid as u32) };
            let got = run_op(
                &ctx,
                &Op::GruCell(cell),
                &[tensor(&[1, 2], x0.clone()), tensor(&[rows, 2], w.clone()), tensor(&[rows, 2], r.clone()), tensor(&[1, 2], h.clone()), tensor(&[rows], b.clone())],
                &[false; 5],
            )
            .unwrap();
            let h1 = gru_step(order, reset_after, &x0, &w, &r, &b, &h);
            assert_near(&got[0].data, &h1, &format!("gruCell {order} resetAfter {reset_after}"));
            let net = GruOptions { has_bias: true, has_initial_hidden_state: true, reset_after, layout, ..GruOptions::new(2, hid as u32) };
            let got = run_op(
                &ctx,
                &Op::Gru(net),
                &[
                    tensor(&[2, 1, 2], [x0.clone(), x1.clone()].concat()),
                    tensor(&[1, rows, 2], w.clone()),
                    tensor(&[1, rows, 2], r.clone()),
                    tensor(&[1, rows], b.clone()),
                    tensor(&[1, 1, 2], h.clone()),
                ],
                &[false; 5],
            )
            .unwrap();
            let h2 = gru_step(order, reset_after, &x1, &w, &r, &b, &h1);
            assert_near(&got[0].data, &h2, &format!("gru {order} resetAfter {reset_after}"));
        }
    }
}
