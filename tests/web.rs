//! Browser tests of the WebNN JavaScript API in headless Chromium (WebGPU on SwiftShader):
//! `tests/web.js` holds the test bodies, written against the standard globals as a page would
//! use them; each Rust test installs the polyfill and awaits one of them.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen(module = "/tests/web.js")]
extern "C" {
    #[wasm_bindgen(js_name = buildDispatchRead)]
    fn build_dispatch_read() -> js_sys::Promise;
    #[wasm_bindgen(js_name = float16ViaUint16Array)]
    fn float16_via_uint16_array() -> js_sys::Promise;
    #[wasm_bindgen(js_name = errorTypes)]
    fn error_types() -> js_sys::Promise;
    #[wasm_bindgen(js_name = swapRoundTrip)]
    fn swap_round_trip() -> js_sys::Promise;
    #[wasm_bindgen(js_name = quotaExceeded)]
    fn quota_exceeded() -> js_sys::Promise;
    #[wasm_bindgen(js_name = installLeavesPolyfillInPlace)]
    fn install_leaves_polyfill_in_place() -> js_sys::Promise;
    #[wasm_bindgen(js_name = specialValues)]
    fn special_values() -> js_sys::Promise;
}

/// Installs the polyfill (replacing a native WebNN, if any) on the WebGPU backend, a software
/// adapter's included (the `cpu` stage runs the API on the CPU backend), and runs one JS test.
async fn run(test: fn() -> js_sys::Promise) {
    assert!(webnn_wgpu::api::prefer_backend("webgpu"));
    assert!(webnn_wgpu::api::install(true));
    if let Err(e) = JsFuture::from(test()).await {
        let message = js_sys::Reflect::get(&e, &"stack".into())
            .ok()
            .and_then(|s| s.as_string())
            .unwrap_or_else(|| format!("{e:?}"));
        panic!("{message}");
    }
}

#[wasm_bindgen_test]
async fn build_dispatch_and_read_a_small_graph() {
    run(build_dispatch_read).await;
}

#[wasm_bindgen_test]
async fn float16_through_uint16_array() {
    run(float16_via_uint16_array).await;
}

#[wasm_bindgen_test]
async fn errors_have_the_spec_types() {
    run(error_types).await;
}

#[wasm_bindgen_test]
async fn swap_out_and_in_is_bit_identical_and_frees_device_memory() {
    run(swap_round_trip).await;
}

#[wasm_bindgen_test]
async fn a_graph_larger_than_the_budget_is_a_quota_exceeded_error() {
    run(quota_exceeded).await;
}

#[wasm_bindgen_test]
async fn install_defines_the_interfaces() {
    run(install_leaves_polyfill_in_place).await;
}

#[wasm_bindgen_test]
async fn log_tan_and_exp_keep_ieee_special_values_and_accuracy() {
    run(special_values).await;
}

/// float16 widening (vectorized, used by the weight loader and the CPU backend) against the
/// `half` crate's software conversion, bit for bit, for every one of the 65,536 halves.
#[wasm_bindgen_test]
fn float16_widening_matches_half_for_every_value() {
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    let mut out = vec![0.0f32; bits.len()];
    webnn_wgpu::operand::widen_f16(&bits, &mut out);
    for (&h, &w) in bits.iter().zip(&out) {
        assert_eq!(w.to_bits(), half::f16::from_bits(h).to_f32().to_bits(), "half {h:#06x}");
    }
}

/// float16 narrowing (vectorized, the CPU backend's float16 outputs) against the `half` crate's
/// software conversion, bit for bit: every top 16 bits of a float32 with low bits at and around
/// the rounding points, as tests/weights.rs checks natively.
#[wasm_bindgen_test]
fn float16_narrowing_matches_half() {
    let lows = [0u32, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xffff];
    let values: Vec<f32> = (0..=0xffffu32).flat_map(|hi| lows.iter().map(move |lo| f32::from_bits(hi << 16 | lo))).collect();
    let mut out = vec![0u16; values.len()];
    webnn_wgpu::operand::narrow_f16(&values, &mut out);
    for (&v, &h) in values.iter().zip(&out) {
        assert_eq!(h, half::f16::from_f32(v).to_bits(), "float32 {:#010x}", v.to_bits());
    }
}

/// The CPU backend's SIMD128 sigmoid (four lanes at a time) against its scalar function, bit for
/// bit, over a sweep and the special values (NaN, infinities, signed zeros, subnormals, the
/// exponent's clamp bounds); a length of 4k + 3 runs the scalar tail too.
#[wasm_bindgen_test]
fn cpu_sigmoid_lanes_equal_the_scalar_function() {
    use webnn_wgpu::backend::cpu::kernels::elementwise::{activation, sigmoid_f};
    use webnn_wgpu::ops::activation::Activation;
    let mut x: Vec<f32> = (-4000..4000).map(|i| i as f32 * 0.031).collect();
    x.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40, -1e-40, 88.9, 89.1, 103.9, 104.1, -104.1, 1e30, -1e30]);
    x.extend([0.5]);
    assert_eq!(x.len() % 4, 3);
    let mut out = vec![0.0f32; x.len()];
    activation(&Activation::Sigmoid, &x, &mut out).unwrap();
    for (&v, &y) in x.iter().zip(&out) {
        assert_eq!(y.to_bits(), sigmoid_f(v).to_bits(), "sigmoid({v:e})");
    }
}

/// The CPU backend's SIMD128 depthwise rows at horizontal stride 2 (each padded row split into
/// its even and odd columns) against a float64 depthwise conv written here from the spec: 3x3 and
/// 5x5 downsampling layers, odd widths, uneven and wide padding, stride 2 along one axis only.
#[wasm_bindgen_test]
fn cpu_depthwise_stride_two_matches_a_float64_conv() {
    use webnn_wgpu::backend::cpu::kernels::conv2d as conv;
    use webnn_wgpu::ops::conv2d::{conv2d_geometry, Conv2dFilterLayout, Conv2dOptions, InputLayout};
    use webnn_wgpu::{DataType, OperandDescriptor};
    let cases: [(usize, usize, usize, usize, [usize; 4], [usize; 2]); 5] = [
        (16, 20, 20, 3, [0, 1, 0, 1], [2, 2]),
        (8, 21, 23, 5, [2, 2, 2, 2], [2, 2]),
        (3, 4, 34, 3, [1, 1, 5, 6], [2, 2]),
        (3, 6, 9, 3, [1, 1, 1, 1], [1, 2]),
        (2, 3, 2, 3, [1, 1, 1, 1], [2, 2]),
    ];
    let mut seed = 0x2545_f491u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed % 2001) as f32 / 1000.0 - 1.0
    };
    for (c, h, w, k, pad, stride) in cases {
        let u = |v: usize| v as u32;
        let options = Conv2dOptions {
            padding: Some(pad.map(u).to_vec()),
            strides: Some(stride.map(u).to_vec()),
            dilations: Some(vec![1, 1]),
            groups: u(c),
            input_layout: InputLayout::Nchw,
            filter_layout: Conv2dFilterLayout::Oihw,
            has_bias: true,
        };
        let descriptors = [vec![1, c, h, w], vec![c, 1, k, k], vec![c]].map(|s| OperandDescriptor::new(DataType::Float32, s.into_iter().map(u).collect::<Vec<u32>>()));
        let refs: Vec<&OperandDescriptor> = descriptors.iter().collect();
        let geometry = conv2d_geometry(&options, &refs).unwrap();
        let (input, filter, bias): (Vec<f32>, Vec<f32>, Vec<f32>) =
            ((0..c * h * w).map(|_| next()).collect(), (0..c * k * k).map(|_| next()).collect(), (0..c).map(|_| next()).collect());
        let [out_h, out_w] = [(h + pad[0] + pad[1] - k) / stride[0] + 1, (w + pad[2] + pad[3] - k) / stride[1] + 1];
        let mut out = vec![f32::NAN; c * out_h * out_w];
        conv::conv2d(&geometry, &input, &filter, Some(&bias), &mut out).unwrap();
        for ch in 0..c {
            for oy in 0..out_h {
                for ox in 0..out_w {
                    let (mut sum, mut scale) = (bias[ch] as f64, bias[ch].abs() as f64);
                    for fy in 0..k {
                        for fx in 0..k {
                            let (y, x) = ((oy * stride[0] + fy) as i64 - pad[0] as i64, (ox * stride[1] + fx) as i64 - pad[2] as i64);
                            if y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w {
                                let v = input[(ch * h + y as usize) * w + x as usize] as f64 * filter[(ch * k + fy) * k + fx] as f64;
                                sum += v;
                                scale += v.abs();
                            }
                        }
                    }
                    let got = out[(ch * out_h + oy) * out_w + ox] as f64;
                    assert!((got - sum).abs() <= 1e-6 * scale + 1e-7, "{c}x{h}x{w} k{k} pad {pad:?} stride {stride:?}: ({ch}, {oy}, {ox}) = {got}, float64 gives {sum}");
                }
            }
        }
    }
}
