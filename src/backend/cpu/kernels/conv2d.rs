//! Float32 conv2d and convTranspose2d over a [`ConvGeometry`], which gives every tensor's layout
//! as element strides of its logical axes.
//!
//! conv2d, per batch and group: a 1x1, stride-1, unpadded filter is one GEMM straight over the
//! input; any other filter is im2col (output rows tiled so the columns stay within
//! [`COLUMN_FLOATS`]) and the packed GEMM; depthwise convolutions (one input channel per group)
//! run a direct loop over the window instead, vectorised along width (nchw) or channels (nhwc);
//! nchw 3x3 filters at stride 1 with enough channels run Winograd's F(2x2, 3x3) (`winograd.rs`).
//! The product's orientation follows the layout, so the GEMM writes the output in place: nchw
//! computes `filter [Cout x K] * columns [K x HW]`, nhwc `columns [HW x K] * filter^T [K x Cout]`.
//! Images of fewer than [`SMALL_IMAGE_PIXELS`] output pixels take several batches' columns side
//! by side into one product per group (a GEMM of a few columns spends more on calls, packing and
//! half-empty micro-kernel panels than on multiply-adds); nchw then copies each batch's columns
//! to its output planes.
//!
//! convTranspose2d: per batch and group, `filter^T [Cout*KH*KW x Cin] * input [Cin x HW]` by
//! GEMM, then col2im adds each column to the output pixels it reaches.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::ops::conv2d::{ConvGeometry, InputLayout};

use crate::backend::cpu::threads::{self, Disjoint};

use super::gemm::{gemm, gemm_packed_rows, gemm_prepacked, Matrix, Packed};
use super::scratch::{self, Slot};
use super::winograd;

/// Floats of im2col (or col2im) columns per tile, 4 MiB: larger products are tiled by rows.
const COLUMN_FLOATS: usize = 1 << 20;
/// Output rows of at least this many pixels copy the input runs they read (im2col).
const COPIED_RUN: usize = 8;
/// Output images of fewer pixels than this run several batches as one GEMM.
const SMALL_IMAGE_PIXELS: usize = 64;
/// Winograd's F(2x2, 3x3) runs a convolution of `c` input and `o` output channels when
/// `c * o >= WINOGRAD_CHANNELS * (c + o)` (the multiply-adds it saves grow with `c * o`, its
/// transforms with `c + o`; timed alone, 32 -> 32 channels lost to im2col and 32 -> 64 won), and
/// it has this many output tiles (2x2 pixels each).
const WINOGRAD_CHANNELS: usize = 20;
const WINOGRAD_MIN_TILES: usize = 16;
/// Convolutions of at least this many multiply-adds run their tiles on the CPU threads (smaller
/// ones gain less than the split costs, as for the GEMM).
const PARALLEL_MACS: usize = 1 << 21;

/// How a conv2d runs, which fixes the order its filter is rearranged in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// nchw: filter rows `[oc][ic][kh][kw]` times columns.
    Planar,
    /// nhwc: columns times the filter, rows `[oc][kh][kw][ic]`.
    Interleaved,
    /// nchw depthwise: weights `[oc][kh][kw]`, vectorised along output rows.
    DepthwisePlanar,
    /// nhwc depthwise: weights `[kh][kw][oc]`, vectorised along channels.
    DepthwiseInterleaved,
    /// nchw, one group, 3x3 at stride 1 and dilation 1, channels enough to fill GEMMs: Winograd's
    /// F(2x2, 3x3), weights the 16 transformed matrices `[xi][oc][ic]` (see `winograd.rs`).
    Winograd,
}

/// A conv2d filter rearranged once (when a graph is compiled) for [`conv2d_packed`], which then
/// skips the per-call rearrangement that [`conv2d`] does.
#[derive(Debug, Clone)]
pub struct PackedFilter {
    key: FilterKey,
    weights: Vec<f32>,
    /// With one group, the filter also packed as the GEMM's operand (left for nchw, right for
    /// nhwc; Winograd's 16 matrices as left operands), so that no call packs it.
    gemm: Vec<Packed>,
}

/// What a packed filter was built for; [`conv2d_packed`] refuses a geometry that differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FilterKey {
    method: Method,
    groups: usize,
    output_channels: usize,
    input_per_group: usize,
    filter_size: [usize; 2],
}

impl PackedFilter {
    /// Rearranges `filter` (laid out as `g` says) for convolutions of geometry `g`.
    pub fn new(g: &ConvGeometry, filter: &[f32]) -> Result<PackedFilter> {
        let conv = Conv::new(g, false)?;
        let method = conv.method()?;
        conv.check_filter(filter)?;
        let mut weights = Vec::new();
        weights
            .try_reserve_exact(conv.weights_len(method))
            .map_err(|_| Error::Operation("conv2d: cannot allocate the packed filter".into()))?;
        weights.resize(conv.weights_len(method), 0.0);
        conv.pack_filter(method, filter, &mut weights);
        let depth = conv.filter_len() / conv.output_channels.max(1);
        let matrix = Matrix::row_major(&weights, conv.output_channels, depth);
        let gemm = match method {
            Method::Winograd => winograd::pack_transformed(&weights, conv.output_channels, conv.input_channels)?,
            _ if conv.groups != 1 => Vec::new(),
            Method::Planar => vec![Packed::left(matrix)?],
            Method::Interleaved => vec![Packed::right(matrix.t())?],
            Method::DepthwisePlanar | Method::DepthwiseInterleaved => Vec::new(),
        };
        Ok(PackedFilter { key: conv.filter_key(method), weights, gemm })
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> u64 {
        (self.weights.len() * 4) as u64 + self.gemm.iter().map(Packed::bytes).sum::<u64>()
    }
}

/// conv2d of `input` by `filter` (plus `bias` per output channel) into `out`, all laid out as
/// `g` says.
pub fn conv2d(g: &ConvGeometry, input: &[f32], filter: &[f32], bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
    let conv = Conv::new(g, false)?;
    let method = conv.method()?;
    conv.check_filter(filter)?;
    scratch::with(Slot::Filter, conv.weights_len(method), |weights| {
        conv.pack_filter(method, filter, weights);
        conv.run(method, input, weights, &[], bias, out)
    })
}

/// [`conv2d`] with a filter packed by [`PackedFilter::new`] for the same geometry.
pub fn conv2d_packed(
    g: &ConvGeometry,
    input: &[f32],
    filter: &PackedFilter,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let conv = Conv::new(g, false)?;
    let method = conv.method()?;
    if filter.key != conv.filter_key(method) {
        return Err(Error::Operation("conv2d: the packed filter was built for another geometry".into()));
    }
    conv.run(method, input, &filter.weights, &filter.gemm, bias, out)
}

/// convTranspose2d of `input` by `filter` (plus `bias` per output channel) into `out`, all laid
/// out as `g` says.
pub fn conv_transpose2d(
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let conv = Conv::new(g, true)?;
    conv.check_filter(filter)?;
    conv.check_operands(input, bias, out)?;
    if conv.output_is_empty() {
        return Ok(());
    }
    conv.fill_output(bias, out);
    let [in_h, in_w] = conv.input_size;
    // The input's pixels as the columns of one matrix per channel.
    if conv.input_strides[2] != in_w * conv.input_strides[3] {
        return Err(Error::NotSupported("convTranspose2d: the input's rows are not contiguous pixels".into()));
    }
    let per_group = conv.output_channels / conv.groups;
    let [k_h, k_w] = conv.filter_size;
    // Rows of the transposed filter: (output channel within the group, kh, kw).
    let rows = per_group * k_h * k_w;
    let row_len = conv.scratch_len(rows, in_w)?;
    let tile_rows = (COLUMN_FLOATS / row_len.max(1)).clamp(1, in_h.max(1));
    let columns_len = conv.scratch_len(row_len, tile_rows)?;
    scratch::with(Slot::Filter, conv.filter_len(), |weights| {
        conv.pack_transposed_filter(filter, weights);
        scratch::with(Slot::Columns, columns_len, |columns| {
            for n in 0..conv.batches {
                for group in 0..conv.groups {
                    let (first, end) = conv.group_channels(group);
                    let filter = Matrix {
                        data: weights,
                        offset: rows * first,
                        rows,
                        cols: end - first,
                        row_stride: end - first,
                        col_stride: 1,
                    };
                    for iy0 in (0..in_h).step_by(tile_rows) {
                        let tile = tile_rows.min(in_h - iy0) * in_w;
                        let input = Matrix {
                            data: input,
                            offset: n * conv.input_strides[0] + first * conv.input_strides[1] + iy0 * conv.input_strides[2],
                            rows: end - first,
                            cols: tile,
                            row_stride: conv.input_strides[1],
                            col_stride: conv.input_strides[3],
                        };
                        let columns = &mut columns[..rows * tile];
                        gemm(filter, input, 1.0, columns, tile, false)?;
                        conv.col2im(columns, n, group * per_group, iy0, out);
                    }
                }
            }
            Ok(())
        })
    })
}

/// A [`ConvGeometry`] in `usize`, checked: strides, dilations and groups are positive, channels
/// divide as the operator needs, and window positions fit `i64`.
struct Conv {
    batches: usize,
    input_channels: usize,
    input_size: [usize; 2],
    output_channels: usize,
    output_size: [usize; 2],
    filter_size: [usize; 2],
    groups: usize,
    input_layout: InputLayout,
    transpose: bool,
    /// Top and left padding.
    padding: [i64; 2],
    strides: [i64; 2],
    dilations: [i64; 2],
    input_strides: [usize; 4],
    output_strides: [usize; 4],
    filter_strides: [usize; 4],
}

fn usizes<const N: usize, T: Copy + TryInto<usize>>(name: &str, values: [T; N]) -> Result<[usize; N]> {
    let mut out = [0; N];
    for (o, v) in out.iter_mut().zip(values) {
        *o = v.try_into().map_err(|_| Error::NotSupported(format!("{name} exceed this platform's indices")))?;
    }
    Ok(out)
}

/// Checks that the last element of a tensor of `dims` with element `strides` lies in `len`.
fn check_extent(what: &str, len: usize, dims: [usize; 4], strides: [usize; 4]) -> Result<()> {
    if dims.contains(&0) {
        return Ok(());
    }
    let last = dims
        .iter()
        .zip(strides)
        .try_fold(0usize, |sum, (&d, s)| (d - 1).checked_mul(s).and_then(|x| sum.checked_add(x)));
    match last {
        Some(last) if last < len => Ok(()),
        _ => Err(Error::Operation(format!("{what}: {dims:?} with strides {strides:?} exceeds its {len} elements"))),
    }
}

/// The `x` in `0..count` whose position `x * stride + offset` lies in `0..size`, as a range.
fn valid_range(count: usize, stride: i64, offset: i64, size: usize) -> (usize, usize) {
    let size = size as i64;
    let lo = if offset >= 0 { 0 } else { (stride - 1 - offset) / stride };
    let hi = if offset >= size { 0 } else { (size - offset + stride - 1) / stride };
    let hi = hi.min(count as i64) as usize;
    ((lo as usize).min(hi), hi)
}

impl Conv {
    fn new(g: &ConvGeometry, transpose: bool) -> Result<Conv> {
        let name = if transpose { "convTranspose2d" } else { "conv2d" };
        if g.transpose != transpose {
            return Err(Error::Operation(format!("{name}: the geometry is not a {name}'s")));
        }
        let [batches, input_channels, output_channels, groups] =
            usizes(name, [g.batches, g.input_channels, g.output_channels, g.groups])?;
        let [in_h, in_w, out_h, out_w, k_h, k_w] = usizes(
            name,
            [g.input_size[0], g.input_size[1], g.output_size[0], g.output_size[1], g.filter_size[0], g.filter_size[1]],
        )?;
        if groups == 0 || g.strides.contains(&0) || g.dilations.contains(&0) {
            return Err(Error::Operation(format!("{name}: groups, strides and dilations must be positive")));
        }
        if output_channels % groups != 0 || (!transpose && input_channels % groups != 0) {
            return Err(Error::Operation(format!("{name}: groups {groups} do not divide the channels")));
        }
        // Window positions are computed in i64: bound them well inside it.
        for axis in 0..2 {
            let size = g.input_size[axis].max(g.output_size[axis]) as u128;
            let reach = size * (g.strides[axis] as u128 + 1)
                + g.filter_size[axis] as u128 * g.dilations[axis] as u128
                + g.padding[2 * axis] as u128
                + g.padding[2 * axis + 1] as u128;
            if reach >= 1 << 62 {
                return Err(Error::NotSupported(format!("{name}: window positions exceed 64-bit indices")));
            }
        }
        let conv = Conv {
            batches,
            input_channels,
            input_size: [in_h, in_w],
            output_channels,
            output_size: [out_h, out_w],
            filter_size: [k_h, k_w],
            groups,
            input_layout: g.input_layout,
            transpose,
            padding: [g.padding[0] as i64, g.padding[2] as i64],
            strides: [g.strides[0] as i64, g.strides[1] as i64],
            dilations: [g.dilations[0] as i64, g.dilations[1] as i64],
            input_strides: usizes(name, g.input_strides)?,
            output_strides: usizes(name, g.output_strides)?,
            filter_strides: usizes(name, g.filter_strides)?,
        };
        // Every count the kernels form (filter elements, a group's filter depth) fits `usize`.
        if conv.filter_dims().iter().try_fold(1usize, |n, &d| n.checked_mul(d)).is_none() {
            return Err(Error::NotSupported(format!("{name}: the filter has too many elements")));
        }
        Ok(conv)
    }

    fn name(&self) -> &'static str {
        if self.transpose {
            "convTranspose2d"
        } else {
            "conv2d"
        }
    }

    /// The filter's logical dims: `o, i, h, w` (conv2d) or `i, o, h, w` (convTranspose2d, `o`
    /// within a group).
    fn filter_dims(&self) -> [usize; 4] {
        let [k_h, k_w] = self.filter_size;
        if self.transpose {
            [self.input_channels, self.output_channels / self.groups, k_h, k_w]
        } else {
            [self.output_channels, self.input_channels / self.groups, k_h, k_w]
        }
    }

    fn filter_len(&self) -> usize {
        self.filter_dims().iter().product()
    }

    /// Floats of the filter rearranged for `method`.
    fn weights_len(&self, method: Method) -> usize {
        match method {
            Method::Winograd => winograd::POSITIONS * self.output_channels * self.input_channels,
            _ => self.filter_len(),
        }
    }

    fn output_is_empty(&self) -> bool {
        let [h, w] = self.output_size;
        [self.batches, self.output_channels, h, w].contains(&0)
    }

    /// `a * b` floats of scratch, or an error where that overflows.
    fn scratch_len(&self, a: usize, b: usize) -> Result<usize> {
        a.checked_mul(b).ok_or_else(|| Error::NotSupported(format!("{}: the im2col columns exceed this platform's memory", self.name())))
    }

    fn check_filter(&self, filter: &[f32]) -> Result<()> {
        check_extent(&format!("{} filter", self.name()), filter.len(), self.filter_dims(), self.filter_strides)
    }

    fn check_operands(&self, input: &[f32], bias: Option<&[f32]>, out: &[f32]) -> Result<()> {
        let name = self.name();
        let [in_h, in_w] = self.input_size;
        let [out_h, out_w] = self.output_size;
        check_extent(&format!("{name} input"), input.len(), [self.batches, self.input_channels, in_h, in_w], self.input_strides)?;
        let output_dims = [self.batches, self.output_channels, out_h, out_w];
        check_extent(&format!("{name} output"), out.len(), output_dims, self.output_strides)?;
        match bias {
            Some(bias) if bias.len() < self.output_channels => Err(Error::Operation(format!(
                "{name}: bias has {} elements for {} output channels",
                bias.len(),
                self.output_channels
            ))),
            _ => Ok(()),
        }
    }

    /// The input channels `first..end` of convTranspose2d's group `group`: those `c` with
    /// `floor(c * groups / inputChannels) == group` (the spec does not require them to divide).
    fn group_channels(&self, group: usize) -> (usize, usize) {
        let (channels, groups) = (self.input_channels as u64, self.groups as u64);
        let first = |g: u64| (g * channels).div_ceil(groups) as usize;
        (first(group as u64), first(group as u64 + 1))
    }

    fn filter_key(&self, method: Method) -> FilterKey {
        FilterKey {
            method,
            groups: self.groups,
            output_channels: self.output_channels,
            input_per_group: self.input_channels / self.groups,
            filter_size: self.filter_size,
        }
    }

    /// The method for this geometry. The GEMM paths write the output as a row-major matrix,
    /// which needs the dense strides the layouts give.
    fn method(&self) -> Result<Method> {
        let [_, os_c, os_h, os_w] = self.output_strides;
        let [_, is_c, _, is_w] = self.input_strides;
        let out_w = self.output_size[1];
        // One input channel in one group is a plain convolution, which the GEMM runs far faster
        // than the per-tap loop (an STFT as a conv: 258 filters of 256 taps).
        let depthwise = self.groups == self.input_channels && self.groups > 1;
        match self.input_layout {
            InputLayout::Nchw if os_w == 1 && os_h == out_w => Ok(if depthwise && is_w == 1 {
                Method::DepthwisePlanar
            } else if self.winograd_fits() {
                Method::Winograd
            } else {
                Method::Planar
            }),
            InputLayout::Nhwc if os_c == 1 && os_h == out_w * os_w => {
                Ok(if depthwise && is_c == 1 { Method::DepthwiseInterleaved } else { Method::Interleaved })
            }
            _ => Err(Error::NotSupported(format!("conv2d: output strides {:?} are not a dense layout", self.output_strides))),
        }
    }

    /// Whether Winograd's F(2x2, 3x3) runs this convolution: a 3x3 filter at stride 1 and
    /// dilation 1 in one group, with the channels and output tiles to give its 16 GEMMs some
    /// size (below that the transforms cost more than the multiply-adds they save).
    fn winograd_fits(&self) -> bool {
        let [out_h, out_w] = self.output_size;
        self.groups == 1
            && self.filter_size == [3, 3]
            && self.strides == [1, 1]
            && self.dilations == [1, 1]
            && self.input_channels.saturating_mul(self.output_channels)
                >= WINOGRAD_CHANNELS.saturating_mul(self.input_channels.saturating_add(self.output_channels))
            && out_h.div_ceil(2).saturating_mul(out_w.div_ceil(2)) >= WINOGRAD_MIN_TILES
            // The transformed filter's length is formed unchecked.
            && winograd::POSITIONS.checked_mul(self.input_channels).and_then(|n| n.checked_mul(self.output_channels)).is_some()
    }

    /// Writes the bias (or zeros) to every output element.
    fn fill_output(&self, bias: Option<&[f32]>, out: &mut [f32]) {
        let [os_n, os_c, os_h, os_w] = self.output_strides;
        let [out_h, out_w] = self.output_size;
        for n in 0..self.batches {
            for oc in 0..self.output_channels {
                let value = bias.map_or(0.0, |b| b[oc]);
                for oy in 0..out_h {
                    let row = n * os_n + oc * os_c + oy * os_h;
                    (0..out_w).for_each(|ox| out[row + ox * os_w] = value);
                }
            }
        }
    }

    /// Rearranges a conv2d filter in the order `method` reads it.
    fn pack_filter(&self, method: Method, filter: &[f32], weights: &mut [f32]) {
        let [fs_o, fs_i, fs_h, fs_w] = self.filter_strides;
        let [out_c, in_per_group, k_h, k_w] = self.filter_dims();
        if method == Method::Winograd {
            return winograd::transform_filter(filter, self.filter_strides, out_c, in_per_group, weights);
        }
        for oc in 0..out_c {
            for ic in 0..in_per_group {
                for fh in 0..k_h {
                    for fw in 0..k_w {
                        let to = match method {
                            Method::Planar | Method::DepthwisePlanar | Method::Winograd => ((oc * in_per_group + ic) * k_h + fh) * k_w + fw,
                            Method::Interleaved => ((oc * k_h + fh) * k_w + fw) * in_per_group + ic,
                            Method::DepthwiseInterleaved => (fh * k_w + fw) * out_c + oc,
                        };
                        weights[to] = filter[oc * fs_o + ic * fs_i + fh * fs_h + fw * fs_w];
                    }
                }
            }
        }
    }

    /// Rearranges a convTranspose2d filter as one matrix per group: rows `(oc, kh, kw)` (the
    /// group's output channels), columns the group's input channels.
    fn pack_transposed_filter(&self, filter: &[f32], weights: &mut [f32]) {
        let [fs_i, fs_o, fs_h, fs_w] = self.filter_strides;
        let [_, per_group, k_h, k_w] = self.filter_dims();
        let rows = per_group * k_h * k_w;
        for group in 0..self.groups {
            let (first, end) = self.group_channels(group);
            let matrix = &mut weights[rows * first..rows * end];
            for (ci, c) in (first..end).enumerate() {
                for oc in 0..per_group {
                    for fh in 0..k_h {
                        for fw in 0..k_w {
                            let row = (oc * k_h + fh) * k_w + fw;
                            matrix[row * (end - first) + ci] = filter[c * fs_i + oc * fs_o + fh * fs_h + fw * fs_w];
                        }
                    }
                }
            }
        }
    }

    /// conv2d with the filter rearranged for `method`.
    fn run(&self, method: Method, input: &[f32], weights: &[f32], packed: &[Packed], bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
        self.check_operands(input, bias, out)?;
        if weights.len() < self.weights_len(method) {
            return Err(Error::Operation("conv2d: the packed filter is too short".into()));
        }
        if self.output_is_empty() {
            return Ok(());
        }
        match method {
            Method::DepthwisePlanar => self.depthwise_planar(input, weights, bias, out),
            Method::DepthwiseInterleaved => self.depthwise_interleaved(input, weights, bias, out),
            Method::Winograd => {
                let shape = winograd::Shape {
                    batches: self.batches,
                    in_c: self.input_channels,
                    out_c: self.output_channels,
                    input_size: self.input_size,
                    output_size: self.output_size,
                    padding: self.padding,
                    input_strides: self.input_strides,
                    output_strides: self.output_strides,
                };
                let packed = (packed.len() == winograd::POSITIONS).then_some(packed);
                winograd::conv2d(&shape, input, weights, packed, bias, out)
            }
            Method::Planar | Method::Interleaved => {
                if let Some(bias) = bias {
                    self.fill_output(Some(bias), out);
                }
                self.gemm(method, input, weights, packed.first(), bias.is_some(), out)
            }
        }
    }

    /// conv2d by GEMM per batch and group, through im2col unless the filter is pointwise.
    fn gemm(&self, method: Method, input: &[f32], weights: &[f32], packed: Option<&Packed>, accumulate: bool, out: &mut [f32]) -> Result<()> {
        let [is_n, is_c, is_h, is_w] = self.input_strides;
        let [os_n, os_c, os_h, os_w] = self.output_strides;
        let [in_h, in_w] = self.input_size;
        let [out_h, out_w] = self.output_size;
        let [_, in_per_group, k_h, k_w] = self.filter_dims();
        let per_group = self.output_channels / self.groups;
        let depth = in_per_group * k_h * k_w;
        let planar = method == Method::Planar;
        // A 1x1 filter at stride 1 without padding reads the input's pixels as they lie.
        let pointwise = self.filter_size == [1, 1]
            && self.strides == [1, 1]
            && self.padding == [0, 0]
            && [out_h, out_w] == [in_h, in_w]
            && is_h == in_w * is_w;
        let batches_per_product = (COLUMN_FLOATS / depth.saturating_mul(out_h * out_w).max(1)).min(self.batches);
        let batched_output = planar || os_n == out_h * os_h;
        if self.batches > 1 && out_h * out_w < SMALL_IMAGE_PIXELS && batches_per_product > 1 && batched_output {
            return self.gemm_batched(planar, batches_per_product, input, weights, packed, accumulate, out);
        }
        let row_len = self.scratch_len(depth, out_w)?;
        let macs = self.batches.saturating_mul(self.output_channels).saturating_mul(out_h * out_w).saturating_mul(depth);
        let threads = if pointwise || macs < PARALLEL_MACS { 1 } else { threads::count() };
        // Several tiles a thread where there are threads (each its own im2col and GEMM).
        let tile_rows = if pointwise { out_h } else { (COLUMN_FLOATS / row_len.max(1)).clamp(1, out_h).min(out_h.div_ceil(3 * threads)) };
        let columns_len = if pointwise { 0 } else { self.scratch_len(row_len, tile_rows)? };
        let tiles: Vec<[usize; 3]> = (0..self.batches)
            .flat_map(|n| (0..self.groups).flat_map(move |group| (0..out_h).step_by(tile_rows.max(1)).map(move |oy0| [n, group, oy0])))
            .collect();
        let parallel = threads > 1 && tiles.len() > 1;
        let out = Disjoint::new(out);
        let tile = |t: usize| -> Result<()> {
            let [n, group, oy0] = tiles[t];
            // The group's filter: `[Cout x K]` rows (planar) or its transpose (interleaved).
            let filter = Matrix { data: weights, offset: group * per_group * depth, rows: per_group, cols: depth, row_stride: depth, col_stride: 1 };
            let input_start = n * is_n + group * in_per_group * is_c;
            let pixels = tile_rows.min(out_h - oy0) * out_w;
            // The tile's block of the output: `[Cout x pixels]` with rows `os_c` apart (planar)
            // or `[pixels x Cout]` with rows `os_w` apart (interleaved).
            let start = n * os_n + group * per_group * os_c + oy0 * os_h;
            let (rows, cols, ldc) = if planar { (per_group, pixels, os_c) } else { (pixels, per_group, os_w) };
            // Runs `product` (into a C with the given row stride) for the tile's block of the output.
            let write = |product: &dyn Fn(&mut [f32], usize) -> Result<()>| -> Result<()> {
                if !parallel {
                    // SAFETY: the tiles run one after another on this thread, so the rest of the
                    // output is this tile's alone while the product runs.
                    return product(unsafe { out.segment(start, out.len()) }, ldc);
                }
                // Tiles run at once: the product goes through a block of the thread's own, and
                // its rows are copied in (the bias to accumulate onto) and out.
                scratch::with(Slot::Filter, rows * cols, |block| {
                    for (i, row) in block.chunks_exact_mut(cols.max(1)).enumerate() {
                        // SAFETY: the tiles' blocks of the output are disjoint (different batches,
                        // groups or output rows), and one segment is in use at a time.
                        let target = unsafe { out.segment(start + i * ldc, cols) };
                        let len = target.len().min(row.len());
                        if accumulate {
                            row[..len].copy_from_slice(&target[..len]);
                        }
                    }
                    product(block, cols)?;
                    for (i, row) in block.chunks_exact(cols.max(1)).enumerate() {
                        // SAFETY: as above.
                        let target = unsafe { out.segment(start + i * ldc, cols) };
                        let len = target.len().min(row.len());
                        target[..len].copy_from_slice(&row[..len]);
                    }
                    Ok(())
                })
            };
            let offsets = if planar && !pointwise { self.window_offsets(oy0, pixels)? } else { Vec::new() };
            if planar && !pointwise && per_group > 1 && pixels > 1 {
                // im2col's rows go straight into the GEMM's packed panels.
                let rows = |taps: Range<usize>, values: &mut [f32]| self.im2col_planar(input, input_start, &offsets, taps, values, pixels);
                return write(&|c, ldc| gemm_packed_rows(filter, packed, (depth, pixels), &rows, 1.0, c, ldc, accumulate));
            }
            scratch::with(Slot::Columns, columns_len, |columns| {
                let columns = if pointwise {
                    let [row_stride, col_stride] = if planar { [is_c, is_w] } else { [is_w, is_c] };
                    let (rows, cols) = if planar { (in_per_group, pixels) } else { (pixels, in_per_group) };
                    Matrix { data: input, offset: input_start, rows, cols, row_stride, col_stride }
                } else if planar {
                    let columns = &mut columns[..depth * pixels];
                    self.im2col_planar(input, input_start, &offsets, 0..depth, columns, pixels);
                    Matrix::row_major(columns, depth, pixels)
                } else {
                    let columns = &mut columns[..depth * pixels];
                    self.im2col_interleaved(input, input_start, oy0, in_per_group, columns);
                    Matrix::row_major(columns, pixels, depth)
                };
                write(&|c, ldc| {
                    if planar {
                        gemm_prepacked(filter, packed, columns, None, 1.0, c, ldc, accumulate)
                    } else {
                        gemm_prepacked(columns, None, filter.t(), packed, 1.0, c, ldc, accumulate)
                    }
                })
            })
        };
        if parallel {
            threads::try_for_each(tiles.len(), &tile)
        } else {
            // One tile after another (each product may still split between the threads).
            (0..tiles.len()).try_for_each(tile)
        }
    }

    /// conv2d of a small image by GEMM per group and run of `batches_per_product` batches: the
    /// product's columns are the pixels of every batch of the run, batch after batch. nchw
    /// computes `filter [Cout x K] * columns [K x batches*HW]` into a block whose runs of HW
    /// columns are then copied (or, with `accumulate`, added) to each batch's output planes;
    /// nhwc's `columns [batches*HW x K] * filter^T` is already the output's rows, which a dense
    /// layout puts one batch after another.
    #[allow(clippy::too_many_arguments)]
    fn gemm_batched(
        &self,
        planar: bool,
        batches_per_product: usize,
        input: &[f32],
        weights: &[f32],
        packed: Option<&Packed>,
        accumulate: bool,
        out: &mut [f32],
    ) -> Result<()> {
        let [is_n, is_c, _, _] = self.input_strides;
        let [os_n, os_c, _, os_w] = self.output_strides;
        let [_, in_per_group, k_h, k_w] = self.filter_dims();
        let per_group = self.output_channels / self.groups;
        let depth = in_per_group * k_h * k_w;
        let pixels = self.output_size[0] * self.output_size[1];
        let offsets = if planar { self.window_offsets(0, pixels)? } else { Vec::new() };
        for first in (0..self.batches).step_by(batches_per_product) {
            let batches = batches_per_product.min(self.batches - first);
            let columns = batches * pixels;
            for group in 0..self.groups {
                let filter = Matrix { data: weights, offset: group * per_group * depth, rows: per_group, cols: depth, row_stride: depth, col_stride: 1 };
                let input_start = |n: usize| (first + n) * is_n + group * in_per_group * is_c;
                if !planar {
                    scratch::with(Slot::Columns, columns * depth, |values| {
                        for (n, rows) in values.chunks_exact_mut(pixels * depth).enumerate() {
                            self.im2col_interleaved(input, input_start(n), 0, in_per_group, rows);
                        }
                        let c = &mut out[first * os_n + group * per_group..];
                        gemm_prepacked(Matrix::row_major(values, columns, depth), None, filter.t(), packed, 1.0, c, os_w, accumulate)
                    })?;
                    continue;
                }
                // Row `(ic, kh, kw)` of the columns holds batch n's pixels from column n * pixels.
                let rows = |taps: Range<usize>, values: &mut [f32]| {
                    for n in 0..batches {
                        self.im2col_planar(input, input_start(n), &offsets, taps.clone(), &mut values[n * pixels..], columns);
                    }
                };
                scratch::with(Slot::Product, per_group * columns, |block| {
                    if per_group > 1 && columns > 1 {
                        gemm_packed_rows(filter, packed, (depth, columns), &rows, 1.0, block, columns, false)?;
                    } else {
                        scratch::with(Slot::Columns, depth * columns, |values| {
                            rows(0..depth, values);
                            gemm_prepacked(filter, packed, Matrix::row_major(values, depth, columns), None, 1.0, block, columns, false)
                        })?;
                    }
                    for (oc, row) in block.chunks_exact(columns).enumerate() {
                        for (n, run) in row.chunks_exact(pixels).enumerate() {
                            let plane = &mut out[(first + n) * os_n + (group * per_group + oc) * os_c..][..pixels];
                            if accumulate {
                                plane.iter_mut().zip(run).for_each(|(o, &v)| *o += v);
                            } else {
                                plane.copy_from_slice(run);
                            }
                        }
                    }
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// For each tap `(kh, kw)` and each output pixel of the `pixels` from row `oy0`: where the
    /// input value it reads lies from its channel's start, or `usize::MAX` in the padding.
    fn window_offsets(&self, oy0: usize, pixels: usize) -> Result<Vec<usize>> {
        let [_, _, is_h, is_w] = self.input_strides;
        let [in_h, in_w] = self.input_size;
        let out_w = self.output_size[1].max(1);
        let [k_h, k_w] = self.filter_size;
        let [stride_h, stride_w] = self.strides;
        let len = self.scratch_len(k_h * k_w, pixels)?;
        let mut offsets = Vec::new();
        offsets.try_reserve_exact(len).map_err(|_| Error::Operation("conv2d: cannot allocate the window offsets".into()))?;
        for fh in 0..k_h as i64 {
            for fw in 0..k_w as i64 {
                let x_offset = fw * self.dilations[1] - self.padding[1];
                let (lo, hi) = valid_range(out_w, stride_w, x_offset, in_w);
                for ty in 0..pixels / out_w {
                    let iy = (oy0 + ty) as i64 * stride_h + fh * self.dilations[0] - self.padding[0];
                    if iy < 0 || iy >= in_h as i64 || lo >= hi {
                        offsets.extend(std::iter::repeat_n(usize::MAX, out_w));
                        continue;
                    }
                    let row = iy as usize * is_h;
                    let first = row + (lo as i64 * stride_w + x_offset) as usize * is_w;
                    let step = stride_w as usize * is_w;
                    offsets.extend(std::iter::repeat_n(usize::MAX, lo));
                    offsets.extend((0..hi - lo).map(|j| first + j * step));
                    offsets.extend(std::iter::repeat_n(usize::MAX, out_w - hi));
                }
            }
        }
        Ok(offsets)
    }

    /// im2col for the planar product, rows `taps` (row `(ic, kh, kw)` holds the input value each
    /// output pixel of the tile reads through that tap, 0 in the padding) `row_stride` apart in
    /// `values`, through `offsets` ([`Conv::window_offsets`]): output rows of at least
    /// [`COPIED_RUN`] pixels that read a contiguous run of the input copy it; others gather each
    /// value, which costs the same for every width (copies of the short rows of small images
    /// cost more in calls than in moving floats).
    fn im2col_planar(&self, input: &[f32], input_start: usize, offsets: &[usize], taps: Range<usize>, values: &mut [f32], row_stride: usize) {
        let per_channel = (self.filter_size[0] * self.filter_size[1]).max(1);
        let pixels = offsets.len() / per_channel;
        let out_w = self.output_size[1].max(1);
        let copied = out_w >= COPIED_RUN && self.strides[1] == 1 && self.input_strides[3] == 1;
        let (mut ic, mut tap) = (taps.start / per_channel, taps.start % per_channel);
        for row in values.chunks_mut(row_stride.max(1)).take(taps.len()) {
            let row = &mut row[..pixels];
            let channel = input_start + ic * self.input_strides[1];
            let offsets = &offsets[tap * pixels..][..pixels];
            // The padding's offset overflows or lands past the input: 0.
            let gather = |row: &mut [f32], offsets: &[usize]| {
                for (value, &offset) in row.iter_mut().zip(offsets) {
                    *value = channel.checked_add(offset).and_then(|i| input.get(i)).copied().unwrap_or(0.0);
                }
            };
            if copied {
                let fw = (tap % self.filter_size[1]) as i64;
                let (lo, hi) = valid_range(out_w, 1, fw * self.dilations[1] - self.padding[1], self.input_size[1]);
                for (row, offsets) in row.chunks_exact_mut(out_w).zip(offsets.chunks_exact(out_w)) {
                    // An offset into the padding wraps around: no run then, and no overflow.
                    let start = (lo < hi).then(|| channel.checked_add(offsets[lo.min(out_w - 1)])).flatten();
                    match start.and_then(|i| input.get(i..i.checked_add(hi - lo)?)) {
                        Some(run) => {
                            row[..lo].fill(0.0);
                            row[lo..hi].copy_from_slice(run);
                            row[hi..].fill(0.0);
                        }
                        _ => gather(row, offsets),
                    }
                }
            } else {
                gather(row, offsets);
            }
            tap += 1;
            if tap == per_channel {
                (ic, tap) = (ic + 1, 0);
            }
        }
    }

    /// im2col for the interleaved product: row `p` (an output pixel of the tile from `oy0`)
    /// holds the values its window reads, in the order `(kh, kw, ic)`, 0 in the padding.
    fn im2col_interleaved(&self, input: &[f32], input_start: usize, oy0: usize, in_per_group: usize, columns: &mut [f32]) {
        let [_, is_c, is_h, is_w] = self.input_strides;
        let [in_h, in_w] = self.input_size;
        let out_w = self.output_size[1];
        let [k_h, k_w] = self.filter_size;
        let [stride_h, stride_w] = self.strides;
        let depth = in_per_group * k_h * k_w;
        for (p, row) in columns.chunks_exact_mut(depth.max(1)).enumerate() {
            let (oy, ox) = ((oy0 + p / out_w) as i64, (p % out_w) as i64);
            let mut taps = row.chunks_exact_mut(in_per_group.max(1));
            for fh in 0..k_h as i64 {
                let iy = oy * stride_h + fh * self.dilations[0] - self.padding[0];
                for fw in 0..k_w as i64 {
                    let ix = ox * stride_w + fw * self.dilations[1] - self.padding[1];
                    let Some(tap) = taps.next() else { return };
                    if iy < 0 || iy >= in_h as i64 || ix < 0 || ix >= in_w as i64 {
                        tap.fill(0.0);
                        continue;
                    }
                    let start = input_start + iy as usize * is_h + ix as usize * is_w;
                    if is_c == 1 {
                        tap.copy_from_slice(&input[start..start + tap.len()]);
                    } else {
                        tap.iter_mut().enumerate().for_each(|(ic, v)| *v = input[start + ic * is_c]);
                    }
                }
            }
        }
    }

    /// Depthwise conv2d (nchw): for each tap, the output row adds the weight times the input
    /// row it reads, a contiguous run at stride 1.
    fn depthwise_planar(&self, input: &[f32], weights: &[f32], bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
        let [is_n, is_c, is_h, _] = self.input_strides;
        let [os_n, os_c, os_h, _] = self.output_strides;
        let [in_h, in_w] = self.input_size;
        let [out_h, out_w] = self.output_size;
        let [k_h, k_w] = self.filter_size;
        let [stride_h, stride_w] = self.strides;
        let multiplier = self.output_channels / self.input_channels;
        let planes = self.batches * self.output_channels;
        let out = Disjoint::new(out);
        let parts = self.depthwise_parts(planes);
        if stride_w == 1 || (stride_w == 2 && self.dilations[1] == 1) {
            return self.depthwise_planar_padded(input, weights, bias, &out, &parts);
        }
        threads::for_each(parts.len(), &|part| {
            for plane in parts[part].clone() {
                let (n, oc) = (plane / self.output_channels, plane % self.output_channels);
                let taps = &weights[oc * k_h * k_w..(oc + 1) * k_h * k_w];
                let channel_start = n * is_n + oc / multiplier * is_c;
                for oy in 0..out_h {
                    // SAFETY: each part writes the rows of its own output planes, one at a time.
                    let row = unsafe { out.segment(n * os_n + oc * os_c + oy * os_h, out_w) };
                    row.fill(bias.map_or(0.0, |b| b[oc]));
                    for fh in 0..k_h {
                        let iy = oy as i64 * stride_h + fh as i64 * self.dilations[0] - self.padding[0];
                        if iy < 0 || iy >= in_h as i64 {
                            continue;
                        }
                        let start = channel_start + iy as usize * is_h;
                        for fw in 0..k_w {
                            let weight = taps[fh * k_w + fw];
                            let x_offset = fw as i64 * self.dilations[1] - self.padding[1];
                            let (lo, hi) = valid_range(out_w, stride_w, x_offset, in_w);
                            if lo >= hi {
                                continue;
                            }
                            let ix0 = start + (lo as i64 * stride_w + x_offset) as usize;
                            if stride_w == 1 {
                                let source = &input[ix0..ix0 + hi - lo];
                                row[lo..hi].iter_mut().zip(source).for_each(|(o, &x)| *o += weight * x);
                            } else {
                                let step = stride_w as usize;
                                for (j, o) in row[lo..hi].iter_mut().enumerate() {
                                    *o += weight * input[ix0 + j * step];
                                }
                            }
                        }
                    }
                }
            }
        });
        Ok(())
    }

    /// [`Conv::depthwise_planar`] at horizontal stride 1, or 2 without horizontal dilation:
    /// each input plane is first copied into rows with the horizontal padding written out as
    /// zeros (and room for a last, partial vector), so that every output row is
    /// [`depthwise_row`] over whole rows, without the per-tap bounds and short runs that cost
    /// more than the multiply-adds on small images. At stride 2 each padded row is split into
    /// its even and odd columns (two phase rows), where output x reads tap fw at x + fw / 2 of
    /// phase fw % 2: stride-1 reads again, the taps grouped by phase.
    fn depthwise_planar_padded(&self, input: &[f32], weights: &[f32], bias: Option<&[f32]>, out: &Disjoint, parts: &[Range<usize>]) -> Result<()> {
        let [is_n, is_c, is_h, _] = self.input_strides;
        let [os_n, os_c, os_h, _] = self.output_strides;
        let [in_h, in_w] = self.input_size;
        let [out_h, out_w] = self.output_size;
        let [k_h, k_w] = self.filter_size;
        let multiplier = self.output_channels / self.input_channels;
        let phases = self.strides[1] as usize;
        let (dilation_w, pad_left) = (if phases == 1 { self.dilations[1] as usize } else { 1 }, self.padding[1]);
        // Phase row r of a padded row holds its columns r, r + phases, ...; padded column p is
        // input column p - pad_left, and output x reads `x + j * dilation_w` of a tap's phase.
        let row_len = out_w.next_multiple_of(4) + if phases == 1 { (k_w - 1) * dilation_w } else { k_w.div_ceil(2) };
        let (lo, hi) = valid_range(phases * row_len, 1, -pad_left, in_w);
        let scratch_len = self.scratch_len(in_h * phases, row_len)?;
        // Each filter row's taps grouped by phase: (filter row, phase, taps in `grouped`).
        let mut groups = Vec::with_capacity(k_h * phases);
        let mut order = Vec::with_capacity(k_h * k_w);
        for fh in 0..k_h {
            for r in 0..phases.min(k_w) {
                let first = order.len();
                order.extend((r..k_w).step_by(phases).map(|fw| fh * k_w + fw));
                groups.push((fh, r, first..order.len()));
            }
        }
        threads::try_for_each(parts.len(), &|part| {
            scratch::with(Slot::Columns, scratch_len, |padded| {
                padded.fill(0.0);
                let mut grouped = vec![0.0; order.len()];
                for plane in parts[part].clone() {
                    let (n, oc) = (plane / self.output_channels, plane % self.output_channels);
                    let taps = &weights[oc * k_h * k_w..(oc + 1) * k_h * k_w];
                    grouped.iter_mut().zip(&order).for_each(|(g, &t)| *g = taps[t]);
                    let channel_start = n * is_n + oc / multiplier * is_c;
                    if lo < hi {
                        let first = (lo as i64 - pad_left) as usize;
                        for (iy, row) in padded.chunks_exact_mut(phases * row_len).enumerate() {
                            let start = channel_start + iy * is_h + first;
                            let source = &input[start..start + hi - lo];
                            if phases == 1 {
                                row[lo..hi].copy_from_slice(source);
                            } else {
                                for (p, &x) in (lo..hi).zip(source) {
                                    row[(p % 2) * row_len + p / 2] = x;
                                }
                            }
                        }
                    }
                    let mut rows = Vec::with_capacity(groups.len());
                    for oy in 0..out_h {
                        rows.clear();
                        for (fh, r, span) in &groups {
                            let iy = oy as i64 * self.strides[0] + *fh as i64 * self.dilations[0] - self.padding[0];
                            if (0..in_h as i64).contains(&iy) {
                                rows.push((&padded[(iy as usize * phases + r) * row_len..][..row_len], &grouped[span.clone()]));
                            }
                        }
                        // SAFETY: each part writes the rows of its own output planes, one at a time.
                        let row = unsafe { out.segment(n * os_n + oc * os_c + oy * os_h, out_w) };
                        depthwise_row(&rows, dilation_w, bias.map_or(0.0, |b| b[oc]), row);
                    }
                }
                Ok(())
            })
        })
    }

    /// Ranges of `units` (output planes or rows) for the CPU threads, about three a thread where
    /// the depthwise convolution is large enough to split.
    fn depthwise_parts(&self, units: usize) -> Vec<std::ops::Range<usize>> {
        let taps = self.filter_size[0] * self.filter_size[1];
        let macs = self.batches * self.output_channels * self.output_size[0] * self.output_size[1] * taps;
        threads::ranges(units, macs >= PARALLEL_MACS, 3, 1)
    }

    /// Depthwise conv2d (nhwc): each output pixel's channels add the weights of a tap times the
    /// input pixel's channels, each repeated `multiplier` times.
    fn depthwise_interleaved(&self, input: &[f32], weights: &[f32], bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
        let [is_n, _, is_h, is_w] = self.input_strides;
        let [os_n, _, os_h, os_w] = self.output_strides;
        let [in_h, in_w] = self.input_size;
        let [out_h, out_w] = self.output_size;
        let [k_h, k_w] = self.filter_size;
        let [stride_h, stride_w] = self.strides;
        let (in_c, out_c) = (self.input_channels, self.output_channels);
        let multiplier = out_c / in_c;
        let out = Disjoint::new(out);
        let parts = self.depthwise_parts(self.batches * out_h);
        threads::for_each(parts.len(), &|part| {
            for output_row in parts[part].clone() {
                let (n, oy) = (output_row / out_h, output_row % out_h);
                for ox in 0..out_w {
                    // SAFETY: each part writes the pixels of its own output rows, one at a time.
                    let pixel = unsafe { out.segment(n * os_n + oy * os_h + ox * os_w, out_c) };
                    match bias {
                        Some(bias) => pixel.copy_from_slice(&bias[..out_c]),
                        None => pixel.fill(0.0),
                    }
                    for fh in 0..k_h {
                        let iy = oy as i64 * stride_h + fh as i64 * self.dilations[0] - self.padding[0];
                        if iy < 0 || iy >= in_h as i64 {
                            continue;
                        }
                        for fw in 0..k_w {
                            let ix = ox as i64 * stride_w + fw as i64 * self.dilations[1] - self.padding[1];
                            if ix < 0 || ix >= in_w as i64 {
                                continue;
                            }
                            let source = &input[n * is_n + iy as usize * is_h + ix as usize * is_w..][..in_c];
                            let taps = &weights[(fh * k_w + fw) * out_c..][..out_c];
                            if multiplier == 1 {
                                for ((o, &x), &w) in pixel.iter_mut().zip(source).zip(taps) {
                                    *o += x * w;
                                }
                            } else {
                                let outputs = pixel.chunks_exact_mut(multiplier).zip(taps.chunks_exact(multiplier));
                                for ((o, w), &x) in outputs.zip(source) {
                                    o.iter_mut().zip(w).for_each(|(o, &w)| *o += x * w);
                                }
                            }
                        }
                    }
                }
            }
        });
        Ok(())
    }

    /// col2im of convTranspose2d: adds row `(oc, kh, kw)` of `columns` (input pixels from row
    /// `iy0`) to the output pixels `iy * stride - padding + kh * dilation` they reach.
    fn col2im(&self, columns: &[f32], n: usize, first_channel: usize, iy0: usize, out: &mut [f32]) {
        let [os_n, os_c, os_h, os_w] = self.output_strides;
        let in_w = self.input_size[1];
        let [out_h, out_w] = self.output_size;
        let [k_h, k_w] = self.filter_size;
        let [stride_h, stride_w] = self.strides;
        let pixels = columns.len() / (self.output_channels / self.groups * k_h * k_w).max(1);
        for (r, row) in columns.chunks_exact(pixels.max(1)).enumerate() {
            let (oc, fh, fw) = (first_channel + r / (k_h * k_w), (r / k_w) % k_h, r % k_w);
            let x_offset = fw as i64 * self.dilations[1] - self.padding[1];
            let (lo, hi) = valid_range(in_w, stride_w, x_offset, out_w);
            for (ty, row) in row.chunks_exact(in_w).enumerate() {
                let oy = (iy0 + ty) as i64 * stride_h + fh as i64 * self.dilations[0] - self.padding[0];
                if oy < 0 || oy >= out_h as i64 {
                    continue;
                }
                let start = n * os_n + oc * os_c + oy as usize * os_h;
                for (ix, &value) in row.iter().enumerate().take(hi).skip(lo) {
                    out[start + (ix as i64 * stride_w + x_offset) as usize * os_w] += value;
                }
            }
        }
    }
}

/// One output row of a depthwise conv at horizontal stride 1: `out[x] = bias + sum over (row,
/// weights) and fw of weights[fw] * row[x + fw * dilation]`, added in that order (the order of
/// the general loop). Each row holds at least `out.len()` rounded up to 4, plus the window's
/// reach, floats.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn depthwise_row(rows: &[(&[f32], &[f32])], dilation: usize, bias: f32, out: &mut [f32]) {
    for (x, o) in out.iter_mut().enumerate() {
        let mut acc = bias;
        for &(row, weights) in rows {
            for (fw, &w) in weights.iter().enumerate() {
                acc += w * row[x + fw * dilation];
            }
        }
        *o = acc;
    }
}

/// One output row of a depthwise conv at horizontal stride 1 (see the scalar version): blocks of
/// four vectors of outputs held in registers over every tap.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn depthwise_row(rows: &[(&[f32], &[f32])], dilation: usize, bias: f32, out: &mut [f32]) {
    use core::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};
    /// Vectors of outputs a block.
    const BLOCK: usize = 4;
    let vectors = out.len().div_ceil(4);
    let reach = rows.iter().map(|(_, w)| (w.len().max(1) - 1) * dilation).max().unwrap_or(0);
    if rows.iter().any(|(row, _)| row.len() < vectors * 4 + reach) {
        // Not the layout depthwise_planar_padded makes: nothing to read past.
        out.fill(bias);
        for &(row, weights) in rows {
            for (x, o) in out.iter_mut().enumerate() {
                for (fw, &w) in weights.iter().enumerate() {
                    *o += w * row[x + fw * dilation];
                }
            }
        }
        return;
    }
    let mut v = 0;
    while v < vectors {
        let count = BLOCK.min(vectors - v);
        let mut acc = [f32x4_splat(bias); BLOCK];
        for &(row, weights) in rows {
            for (fw, &w) in weights.iter().enumerate() {
                let w = f32x4_splat(w);
                let base = v * 4 + fw * dilation;
                for (j, acc) in acc.iter_mut().enumerate().take(count) {
                    // SAFETY: base + 4j + 4 <= vectors * 4 + reach <= row.len(), checked above.
                    let x = unsafe { v128_load(row.as_ptr().add(base + 4 * j).cast::<v128>()) };
                    *acc = f32x4_add(*acc, f32x4_mul(w, x));
                }
            }
        }
        let mut block = [0.0f32; 4 * BLOCK];
        for (j, acc) in acc.iter().enumerate() {
            // SAFETY: `block` holds 4 * BLOCK floats.
            unsafe { v128_store(block.as_mut_ptr().add(4 * j).cast::<v128>(), *acc) };
        }
        let end = ((v + count) * 4).min(out.len());
        out[v * 4..end].copy_from_slice(&block[..end - v * 4]);
        v += count;
    }
}
