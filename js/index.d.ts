// Type declarations of the webnn-wgpu package: the WebNN API of the specification's IDL
// (https://www.w3.org/TR/webnn/) and the extensions of docs/EXTENSIONS.md (memoryBudget, memoryInfo,
// swapOut/swapIn/residency/deviceBytes/hostBytes, openWeights/MLWeightFile). Written by hand:
// wasm-bindgen's declarations describe the internal handles, not these interfaces.
// docs/API.md is generated from this file (node scripts/api-docs.mjs).

/** Options of install(). */
export interface InstallOptions {
  /** Replace a browser's own navigator.ml. @default false */
  force?: boolean;
  /**
   * What contexts run on. "auto": WebGPU on a hardware GPU, the CPU backend (wasm, SIMD128)
   * where there is no WebGPU adapter or only a software one (SwiftShader, llvmpipe). "webgpu":
   * any WebGPU adapter, software ones included. "cpu": always the CPU backend.
   * `createContext({accelerated: false})` is the CPU backend in every case.
   * @default "auto"
   */
  backend?: "auto" | "webgpu" | "cpu";
  /**
   * The CPU backend's threads where the page is cross-origin isolated (COOP `same-origin` and
   * COEP `require-corp`, so SharedArrayBuffer exists): the atomics build is loaded and
   * `threads - 1` Web Workers run kernel tasks beside the page's thread. `"auto"` is
   * min(4, ceil(hardwareConcurrency / 2)), onnxruntime-web's default. Without isolation the CPU
   * backend runs on the page's thread alone. Read when the module loads.
   * @default "auto"
   */
  threads?: "auto" | number;
}

/** What init() accepts: the .wasm file's URL, its bytes, a Response or a compiled module. */
export type InitInput =
  | RequestInfo
  | URL
  | Response
  | BufferSource
  | WebAssembly.Module
  | Promise<RequestInfo | URL | Response | BufferSource | WebAssembly.Module>;

/**
 * Defines navigator.ml and the WebNN interfaces on globalThis (a Window or a dedicated, shared or
 * service Worker). Synchronous: the wasm module is fetched and compiled on the first
 * createContext(), or earlier with init(). A browser's own WebNN is left alone unless `force` is
 * true; outside a secure context nothing is defined ([SecureContext]). Returns whether the
 * polyfill was installed.
 */
export function install(options?: InstallOptions): boolean;

/**
 * Loads the wasm module once (the .wasm file beside the package's entry unless `moduleOrPath`
 * says otherwise); resolves when it is ready. A failed load can be retried.
 */
export function init(moduleOrPath?: InitInput): Promise<unknown>;

/** The CPU backend's threads in this page: 1 before the module loads and without isolation. */
export function cpuThreads(): Promise<number>;

/** A buffer a WebNN method reads or writes: AllowSharedBufferSource of the specification. */
export type MLBufferSource = ArrayBuffer | SharedArrayBuffer | ArrayBufferView;

// The interfaces are also exported (for instanceof checks and as types); install() defines
// the same classes on globalThis.
export declare const ML: typeof globalThis.ML;
export type ML = globalThis.ML;
export declare const MLContext: typeof globalThis.MLContext;
export type MLContext = globalThis.MLContext;
export declare const MLGraphBuilder: typeof globalThis.MLGraphBuilder;
export type MLGraphBuilder = globalThis.MLGraphBuilder;
export declare const MLOperand: typeof globalThis.MLOperand;
export type MLOperand = globalThis.MLOperand;
export declare const MLGraph: typeof globalThis.MLGraph;
export type MLGraph = globalThis.MLGraph;
export declare const MLTensor: typeof globalThis.MLTensor;
export type MLTensor = globalThis.MLTensor;
export declare const MLWeightFile: typeof globalThis.MLWeightFile;
export type MLWeightFile = globalThis.MLWeightFile;

declare global {
  interface Navigator {
    /** Present once install() has run (or where the browser implements WebNN). */
    readonly ml: ML;
  }
  interface WorkerNavigator {
    readonly ml: ML;
  }

  // WebGPU's device, only named by the createContext(GPUDevice) overload; merges with
  // @webgpu/types where a project has them.
  interface GPUDevice {}

  var ML: (abstract new () => ML) & { readonly prototype: ML };
  var MLContext: (abstract new () => MLContext) & { readonly prototype: MLContext };
  var MLGraphBuilder: { readonly prototype: MLGraphBuilder; new (context: MLContext): MLGraphBuilder };
  var MLOperand: (abstract new () => MLOperand) & { readonly prototype: MLOperand };
  var MLGraph: (abstract new () => MLGraph) & { readonly prototype: MLGraph };
  var MLTensor: (abstract new () => MLTensor) & { readonly prototype: MLTensor };
  var MLWeightFile: (abstract new () => MLWeightFile) & { readonly prototype: MLWeightFile };

  type MLPowerPreference = 'default' | 'high-performance' | 'low-power';

  interface MLContextOptions {
    /** @default "default" */
    powerPreference?: MLPowerPreference;
    /** false asks for the CPU backend. @default true */
    accelerated?: boolean;
    /**
     * Extension: the most device bytes the context holds. A swap-in or allocation that would go
     * over it first swaps out the least recently dispatched resident graphs (to "host", or to
     * "disk" when their constants are file-backed and have no host copy); one graph larger than
     * the budget rejects with a QuotaExceededError DOMException. No budget when absent.
     */
    memoryBudget?: number;
    /**
     * Extension: the most bytes of host copies the context keeps of constants streamed from
     * weight files (`MLWeightFile.constantTensor()`). A tensor read from its file is also kept in
     * host memory the GPU copies from, while this budget has room (least recently used copies
     * make room), so a graph the memoryBudget evicts goes to "host" and comes back with a GPU
     * copy instead of a file read. No copies when absent (evicted file-backed graphs go to "disk").
     * Copies count in memoryInfo().hostBytes; swapOut({ to: "disk" }) drops a graph's copies.
     */
    hostMemoryBudget?: number;
  }

  /** The object at `navigator.ml` (Window and dedicated Worker). */
  interface ML {
    /** A context on the WebGPU adapter wgpu picks for `powerPreference`; rejects without WebGPU. */
    createContext(options?: MLContextOptions): Promise<MLContext>;
    /** Rejects with NotSupportedError: the polyfill creates and owns its WebGPU device. */
    createContext(gpuDevice: GPUDevice): Promise<MLContext>;
  }

  type MLNamedTensors = Record<string, MLTensor>;

  interface MLContextLostInfo {
    message?: string;
  }

  interface MLContext {
    /** Queues one execution of `graph`: inputs and outputs are MLTensors by the graph's input and output names. Results are read with readTensor(). */
    dispatch(graph: MLGraph, inputs: MLNamedTensors, outputs: MLNamedTensors): void;
    /** A device tensor; `readable`/`writable` allow readTensor()/writeTensor(). */
    createTensor(descriptor: MLTensorDescriptor): Promise<MLTensor>;
    /** An immutable tensor for builder.constant(tensor), shareable by several graphs. */
    createConstantTensor(descriptor: MLOperandDescriptor, inputData: MLBufferSource): Promise<MLTensor>;
    /** Resolves to a copy of the tensor's bytes after the queued work that writes it. */
    readTensor(tensor: MLTensor): Promise<ArrayBuffer>;
    /** Reads into `outputData`, which must have the tensor's byte length. */
    readTensor(tensor: MLTensor, outputData: MLBufferSource): Promise<void>;
    /** Queues a write of `inputData` (the tensor's byte length) to a writable tensor. */
    writeTensor(tensor: MLTensor, inputData: MLBufferSource): void;
    /** Data types and ranks each operator supports on this context (docs/OPERATORS.md). */
    opSupportLimits(): MLOpSupportLimits;
    /** Releases every resource of the context; `lost` resolves. */
    destroy(): void;
    /** Whether the context runs on a hardware GPU (false on the CPU backend and on a software adapter). */
    readonly accelerated: boolean;
    readonly lost: Promise<MLContextLostInfo>;

    /** Extension: the context's device and host bytes, its budget and swap statistics. */
    memoryInfo(): MLMemoryInfo;
    /**
     * Extension: reads only the header of a safetensors or GGUF file and resolves to an
     * MLWeightFile whose tensors stream to the GPU on demand. A truncated, corrupt or lying file
     * rejects with a TypeError or DataError naming the file, the tensor and the problem.
     * A download (a Response from fetch(), or a ReadableStream with options.byteLength and
     * options.cacheName) is read once: it resolves as soon as the header has arrived, tensors
     * stream to the GPU as their bytes arrive, and the bytes go into an OPFS file
     * (MLWeightFile.cached) that a later openWeights(handle) reuses. A cut download rejects the
     * pending constantTensor() calls and leaves no file; a declared length over the origin's
     * quota is a QuotaExceededError.
     */
    openWeights(source: FileSystemFileHandle | Blob | Response | ReadableStream<Uint8Array>, options?: MLOpenWeightsOptions): Promise<MLWeightFile>;

    /**
     * Experimental (the working group's graph cache proposal): stores the graph's finished plan
     * (WebGPU: its kernels' WGSL; CPU: its operators) and its constants in origin-private storage
     * under `key`, replacing what was saved under it. Constants with the same bytes are stored
     * once for every saved graph. A full quota rejects with QuotaExceededError naming the bytes
     * needed, and nothing is left half-written.
     */
    saveGraph(key: string, graph: MLGraph): Promise<void>;
    /**
     * Experimental: the graph saved under `key`, without building it again; on a WebGPU context
     * its constants start in the "disk" tier and stream from the cache on first use. Rejects with
     * NotFoundError for an unknown key, for a graph saved by another package version, for another
     * backend or kind of adapter, and for an entry whose constants were deleted (build and save
     * again); DataError for a corrupt entry (removed).
     */
    loadGraph(key: string): Promise<MLGraph>;
    /** Experimental: the keys of the saved graphs, sorted. */
    listGraphs(): Promise<string[]>;
    /**
     * Experimental: deletes the graph saved under `key` and the constants no other saved graph
     * uses. Returns at once; later graph cache calls of the page wait for it.
     */
    deleteGraph(key: string): void;
  }

  interface MLOpSupportLimits {
    preferredInputLayout?: MLInputOperandLayout;
    maxTensorByteLength?: number;
    input?: MLTensorLimits;
    constant?: MLTensorLimits;
    output?: MLTensorLimits;
    argMin?: MLSingleInputSupportLimits;
    argMax?: MLSingleInputSupportLimits;
    batchNormalization?: MLBatchNormalizationSupportLimits;
    cast?: MLSingleInputSupportLimits;
    clamp?: MLSingleInputSupportLimits;
    concat?: MLConcatSupportLimits;
    conv2d?: MLConv2dSupportLimits;
    convTranspose2d?: MLConv2dSupportLimits;
    cumulativeSum?: MLSingleInputSupportLimits;
    add?: MLBinarySupportLimits;
    sub?: MLBinarySupportLimits;
    mul?: MLBinarySupportLimits;
    div?: MLBinarySupportLimits;
    max?: MLBinarySupportLimits;
    min?: MLBinarySupportLimits;
    pow?: MLBinarySupportLimits;
    equal?: MLBinarySupportLimits;
    notEqual?: MLBinarySupportLimits;
    greater?: MLBinarySupportLimits;
    greaterOrEqual?: MLBinarySupportLimits;
    lesser?: MLBinarySupportLimits;
    lesserOrEqual?: MLBinarySupportLimits;
    logicalNot?: MLLogicalNotSupportLimits;
    logicalAnd?: MLBinarySupportLimits;
    logicalOr?: MLBinarySupportLimits;
    logicalXor?: MLBinarySupportLimits;
    isNaN?: MLLogicalNotSupportLimits;
    isInfinite?: MLLogicalNotSupportLimits;
    abs?: MLSingleInputSupportLimits;
    ceil?: MLSingleInputSupportLimits;
    cos?: MLSingleInputSupportLimits;
    erf?: MLSingleInputSupportLimits;
    exp?: MLSingleInputSupportLimits;
    floor?: MLSingleInputSupportLimits;
    identity?: MLSingleInputSupportLimits;
    log?: MLSingleInputSupportLimits;
    neg?: MLSingleInputSupportLimits;
    reciprocal?: MLSingleInputSupportLimits;
    roundEven?: MLSingleInputSupportLimits;
    sin?: MLSingleInputSupportLimits;
    sign?: MLSingleInputSupportLimits;
    sqrt?: MLSingleInputSupportLimits;
    tan?: MLSingleInputSupportLimits;
    dequantizeLinear?: MLQuantizeDequantizeLinearSupportLimits;
    quantizeLinear?: MLQuantizeDequantizeLinearSupportLimits;
    elu?: MLSingleInputSupportLimits;
    expand?: MLSingleInputSupportLimits;
    gather?: MLGatherSupportLimits;
    gatherElements?: MLGatherSupportLimits;
    gatherND?: MLGatherSupportLimits;
    gelu?: MLSingleInputSupportLimits;
    gemm?: MLGemmSupportLimits;
    gru?: MLGruSupportLimits;
    gruCell?: MLGruCellSupportLimits;
    hardSigmoid?: MLSingleInputSupportLimits;
    hardSwish?: MLSingleInputSupportLimits;
    instanceNormalization?: MLNormalizationSupportLimits;
    layerNormalization?: MLNormalizationSupportLimits;
    leakyRelu?: MLSingleInputSupportLimits;
    linear?: MLSingleInputSupportLimits;
    lstm?: MLLstmSupportLimits;
    lstmCell?: MLLstmCellSupportLimits;
    matmul?: MLBinarySupportLimits;
    pad?: MLSingleInputSupportLimits;
    averagePool2d?: MLSingleInputSupportLimits;
    l2Pool2d?: MLSingleInputSupportLimits;
    maxPool2d?: MLSingleInputSupportLimits;
    prelu?: MLPreluSupportLimits;
    reduceL1?: MLSingleInputSupportLimits;
    reduceL2?: MLSingleInputSupportLimits;
    reduceLogSum?: MLSingleInputSupportLimits;
    reduceLogSumExp?: MLSingleInputSupportLimits;
    reduceMax?: MLSingleInputSupportLimits;
    reduceMean?: MLSingleInputSupportLimits;
    reduceMin?: MLSingleInputSupportLimits;
    reduceProduct?: MLSingleInputSupportLimits;
    reduceSum?: MLSingleInputSupportLimits;
    reduceSumSquare?: MLSingleInputSupportLimits;
    relu?: MLSingleInputSupportLimits;
    resample2d?: MLSingleInputSupportLimits;
    reshape?: MLSingleInputSupportLimits;
    reverse?: MLSingleInputSupportLimits;
    scatterElements?: MLScatterSupportLimits;
    scatterND?: MLScatterSupportLimits;
    sigmoid?: MLSingleInputSupportLimits;
    slice?: MLSingleInputSupportLimits;
    softmax?: MLSingleInputSupportLimits;
    softplus?: MLSingleInputSupportLimits;
    softsign?: MLSingleInputSupportLimits;
    split?: MLSplitSupportLimits;
    tanh?: MLSingleInputSupportLimits;
    tile?: MLSingleInputSupportLimits;
    transpose?: MLSingleInputSupportLimits;
    triangular?: MLSingleInputSupportLimits;
    where?: MLWhereSupportLimits;
  }

  interface MLRankRange {
    min?: number;
    max?: number;
  }

  type MLDataTypeList = MLOperandDataType[];

  interface MLTensorLimits {
    dataTypes?: MLDataTypeList;
    rankRange?: MLRankRange;
  }

  interface MLBinarySupportLimits {
    a?: MLTensorLimits;
    b?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLSingleInputSupportLimits {
    input?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLGraph {
    destroy(): void;
    /** The graph cache proposal's members: each input's and output's descriptor, by name. */
    readonly inputs: Readonly<Record<string, MLOperandDescriptor>>;
    readonly outputs: Readonly<Record<string, MLOperandDescriptor>>;

    /**
     * Extension: releases the GPU buffers of the graph's constants and intermediates once every
     * dispatch queued on it has completed; resolves when the memory is released. Pipelines and
     * the execution plan stay: a swap never recompiles. Rejects with InvalidStateError after
     * destroy().
     */
    swapOut(options?: MLSwapOutOptions): Promise<void>;
    /**
     * Extension: makes the constants resident again (upload from host, or stream from the weight
     * file); a no-op on a resident graph. dispatch() swaps in by itself, so this is a prefetch.
     */
    swapIn(): Promise<void>;
    /** Extension: where the graph's constants are now. */
    readonly residency: MLResidency;
    /** Extension: device bytes the graph holds now. */
    readonly deviceBytes: number;
    /** Extension: host bytes (JS-owned copies of swapped-out constants) the graph holds now. */
    readonly hostBytes: number;
    /**
     * Extension: the order in which the context's memoryBudget evicts graphs: lower priorities
     * first, the least recently dispatched first within one. Mark the graphs a loop runs every
     * step "high" so that only the ones it can afford to reload (experts) cycle through the
     * budget. swapOut() works at any priority. Assigning another value is ignored.
     * @default "normal"
     */
    evictionPriority: MLEvictionPriority;
  }

  /** Extension: MLGraph.evictionPriority. */
  type MLEvictionPriority = 'low' | 'normal' | 'high';

  /** Extension: the three residency tiers of a graph's constants. */
  type MLResidency = 'device' | 'host' | 'disk';

  /** Extension: options of MLGraph.swapOut(). */
  interface MLSwapOutOptions {
    /**
     * "disk" keeps no copy at all and needs constants that came from a weight file.
     * @default "host"
     */
    to?: 'host' | 'disk';
  }

  /** Extension: what MLContext.memoryInfo() returns. */
  interface MLMemoryInfo {
    /** Bytes of GPU memory the context holds (constants, tensors, intermediates). */
    deviceBytes: number;
    /** Bytes of host copies of swapped-out constants (JS-owned, outside wasm memory). */
    hostBytes: number;
    /** The context's memoryBudget, or null without one. */
    budgetBytes: number | null;
    /** Graphs made resident again, by swapIn(), dispatch() or eviction. */
    swapIns: number;
    /** Graphs swapped out, by swapOut() or by the budget. */
    swapOuts: number;
    /** Bytes written to the GPU by swap-ins from host. */
    bytesUploaded: number;
    /** Bytes streamed from weight files to the GPU. */
    bytesStreamedFromDisk: number;
  }

  /** Extension: options of MLContext.openWeights(). */
  interface MLOpenWeightsOptions {
    /**
     * What bfloat16 and block-quantized GGUF tensors become while streaming. Without it,
     * bfloat16 becomes float32 (exact) and quantized types float16 where the device has
     * shader-f16, float32 otherwise.
     */
    floatType?: 'float32' | 'float16';
    /**
     * Called after each streamed chunk of constantTensor(); for a download, after each chunk
     * that arrives instead, with the bytes of the whole file.
     */
    onProgress?: (loadedBytes: number, totalBytes: number) => void;
    /**
     * A download's length in bytes: required for a ReadableStream, and for a Response without
     * a usable Content-Length (none, or a compressed body's).
     */
    byteLength?: number;
    /**
     * The download's file name in the OPFS directory "webnn-wgpu-weights" (no "/", "\" or
     * leading "."): required for a ReadableStream; a Response's defaults to the last segment
     * of its URL's path. An earlier file of the name is replaced.
     */
    cacheName?: string;
  }

  /** Extension: one tensor of a weight file, as its header describes it. */
  interface MLWeightFileTensorInfo {
    readonly name: string;
    /** The WebNN data type of the constant tensor it becomes. */
    readonly dataType: MLOperandDataType;
    readonly shape: readonly number[];
    /** Bytes of the constant tensor (after any conversion). */
    readonly byteLength: number;
    /** The type name in the file (for example "BF16", "F32", "Q8_0"). */
    readonly storedType: string;
    /** Bytes the tensor takes in the file. */
    readonly fileByteLength: number;
  }

  /** Extension (beyond the shared contract; docs/EXTENSIONS.md): options of MLWeightFile.constantTensor(). */
  interface MLConstantTensorOptions {
    /**
     * Weightless build. true: the promise resolves once the bytes are on the GPU. false: it
     * resolves once the GPU buffer is allocated while the bytes stream on in the background, so
     * a graph can be built with the tensor meanwhile; queue work issued after the call
     * (dispatch, writeTensor, readTensor) waits for the stream, and a failed stream rejects the
     * next readTensor. Progress still goes to the file's onProgress.
     * @default true
     */
    wait?: boolean;
  }

  /** Extension: an opened safetensors or GGUF file (MLContext.openWeights()). */
  interface MLWeightFile {
    readonly tensors: readonly MLWeightFileTensorInfo[];
    /**
     * A constant MLTensor (for builder.constant(tensor)) whose bytes stream from the file to the
     * GPU in chunks: peak main memory is bounded by the chunk size. It can go to the "disk" tier.
     * Tensors asked for together (Promise.all over the file's tensors) stream two at a time,
     * each of the two taking a contiguous run of the file, which is faster than one at a time;
     * the host memory stays two chunks however many are asked for.
     * In a dedicated Worker, a FileSystemFileHandle's tensors are read through a sync access
     * handle (closed when the tensor is loaded; a file locked by another one is streamed).
     */
    constantTensor(name: string, options?: MLConstantTensorOptions): Promise<MLTensor>;
    /**
     * A download's OPFS file, once complete: committed, hashed (SHA-256) and recorded. Rejects
     * as the download fails (NetworkError, QuotaExceededError, DataError). null for a file
     * opened from a FileSystemFileHandle, a File or a Blob.
     */
    readonly cached: Promise<FileSystemFileHandle | null>;
  }

  type MLInputOperandLayout = 'nchw' | 'nhwc';

  type MLOperandDataType = 'float32' | 'float16' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'int8' | 'uint8';

  interface MLOperandDescriptor {
    dataType: MLOperandDataType;
    shape: readonly number[];
  }

  interface MLOperand {
    readonly dataType: MLOperandDataType;
    readonly shape: readonly number[];
  }

  interface MLOperatorOptions {
    /** @default "" */
    label?: string;
  }

  type MLNumber = bigint | number;

  interface MLTensorDescriptor extends MLOperandDescriptor {
    /** @default false */
    readable?: boolean;
    /** @default false */
    writable?: boolean;
  }

  interface MLTensor {
    readonly dataType: MLOperandDataType;
    readonly shape: readonly number[];
    readonly readable: boolean;
    readonly writable: boolean;
    readonly constant: boolean;
    destroy(): void;
  }

  type MLNamedOperands = Record<string, MLOperand>;

  interface MLGraphBuilder {
    /** A graph input, bound by name at dispatch(). */
    input(name: string, descriptor: MLOperandDescriptor): MLOperand;
    /** A constant copied from `buffer` (a JS-owned copy that is also its host tier). */
    constant(descriptor: MLOperandDescriptor, buffer: MLBufferSource): MLOperand;
    /** A scalar constant. */
    constant(dataType: MLOperandDataType, value: MLNumber): MLOperand;
    /** A constant backed by a constant MLTensor (createConstantTensor() or MLWeightFile.constantTensor()). */
    constant(tensor: MLTensor): MLOperand;
    /** Compiles the graph up to `outputs`; the builder cannot build again. */
    build(outputs: MLNamedOperands): Promise<MLGraph>;
    argMin(input: MLOperand, axis: number, options?: MLArgMinMaxOptions): MLOperand;
    argMax(input: MLOperand, axis: number, options?: MLArgMinMaxOptions): MLOperand;
    batchNormalization(input: MLOperand, mean: MLOperand, variance: MLOperand, options?: MLBatchNormalizationOptions): MLOperand;
    cast(input: MLOperand, dataType: MLOperandDataType, options?: MLOperatorOptions): MLOperand;
    clamp(input: MLOperand, options?: MLClampOptions): MLOperand;
    concat(inputs: readonly MLOperand[], axis: number, options?: MLOperatorOptions): MLOperand;
    conv2d(input: MLOperand, filter: MLOperand, options?: MLConv2dOptions): MLOperand;
    convTranspose2d(input: MLOperand, filter: MLOperand, options?: MLConvTranspose2dOptions): MLOperand;
    cumulativeSum(input: MLOperand, axis: number, options?: MLCumulativeSumOptions): MLOperand;
    add(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    sub(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    mul(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    div(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    max(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    min(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    pow(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    equal(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    notEqual(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    greater(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    greaterOrEqual(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    lesser(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    lesserOrEqual(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    logicalNot(a: MLOperand, options?: MLOperatorOptions): MLOperand;
    logicalAnd(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    logicalOr(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    logicalXor(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    isNaN(a: MLOperand, options?: MLOperatorOptions): MLOperand;
    isInfinite(a: MLOperand, options?: MLOperatorOptions): MLOperand;
    abs(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    ceil(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    cos(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    erf(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    exp(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    floor(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    identity(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    log(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    neg(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    reciprocal(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    roundEven(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    sin(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    sign(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    sqrt(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    tan(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    dequantizeLinear(input: MLOperand, scale: MLOperand, zeroPoint: MLOperand, options?: MLOperatorOptions): MLOperand;
    quantizeLinear(input: MLOperand, scale: MLOperand, zeroPoint: MLOperand, options?: MLOperatorOptions): MLOperand;
    elu(input: MLOperand, options?: MLEluOptions): MLOperand;
    expand(input: MLOperand, newShape: readonly number[], options?: MLOperatorOptions): MLOperand;
    gather(input: MLOperand, indices: MLOperand, options?: MLGatherOptions): MLOperand;
    gatherElements(input: MLOperand, indices: MLOperand, options?: MLGatherOptions): MLOperand;
    gatherND(input: MLOperand, indices: MLOperand, options?: MLOperatorOptions): MLOperand;
    gelu(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    gemm(a: MLOperand, b: MLOperand, options?: MLGemmOptions): MLOperand;
    gru(input: MLOperand, weight: MLOperand, recurrentWeight: MLOperand, steps: number, hiddenSize: number, options?: MLGruOptions): MLOperand[];
    gruCell(input: MLOperand, weight: MLOperand, recurrentWeight: MLOperand, hiddenState: MLOperand, hiddenSize: number, options?: MLGruCellOptions): MLOperand;
    hardSigmoid(input: MLOperand, options?: MLHardSigmoidOptions): MLOperand;
    hardSwish(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    instanceNormalization(input: MLOperand, options?: MLInstanceNormalizationOptions): MLOperand;
    layerNormalization(input: MLOperand, options?: MLLayerNormalizationOptions): MLOperand;
    leakyRelu(input: MLOperand, options?: MLLeakyReluOptions): MLOperand;
    linear(input: MLOperand, options?: MLLinearOptions): MLOperand;
    lstm(input: MLOperand, weight: MLOperand, recurrentWeight: MLOperand, steps: number, hiddenSize: number, options?: MLLstmOptions): MLOperand[];
    lstmCell(input: MLOperand, weight: MLOperand, recurrentWeight: MLOperand, hiddenState: MLOperand, cellState: MLOperand, hiddenSize: number, options?: MLLstmCellOptions): MLOperand[];
    matmul(a: MLOperand, b: MLOperand, options?: MLOperatorOptions): MLOperand;
    pad(input: MLOperand, beginningPadding: readonly number[], endingPadding: readonly number[], options?: MLPadOptions): MLOperand;
    averagePool2d(input: MLOperand, options?: MLPool2dOptions): MLOperand;
    l2Pool2d(input: MLOperand, options?: MLPool2dOptions): MLOperand;
    maxPool2d(input: MLOperand, options?: MLPool2dOptions): MLOperand;
    prelu(input: MLOperand, slope: MLOperand, options?: MLOperatorOptions): MLOperand;
    reduceL1(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceL2(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceLogSum(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceLogSumExp(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceMax(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceMean(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceMin(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceProduct(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceSum(input: MLOperand, options?: MLReduceOptions): MLOperand;
    reduceSumSquare(input: MLOperand, options?: MLReduceOptions): MLOperand;
    relu(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    resample2d(input: MLOperand, options?: MLResample2dOptions): MLOperand;
    reshape(input: MLOperand, newShape: readonly number[], options?: MLOperatorOptions): MLOperand;
    reverse(input: MLOperand, options?: MLReverseOptions): MLOperand;
    scatterElements(input: MLOperand, indices: MLOperand, updates: MLOperand, options?: MLScatterOptions): MLOperand;
    scatterND(input: MLOperand, indices: MLOperand, updates: MLOperand, options?: MLOperatorOptions): MLOperand;
    sigmoid(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    slice(input: MLOperand, starts: readonly number[], sizes: readonly number[], options?: MLSliceOptions): MLOperand;
    softmax(input: MLOperand, axis: number, options?: MLOperatorOptions): MLOperand;
    softplus(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    softsign(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    split(input: MLOperand, splits: number | readonly number[], options?: MLSplitOptions): MLOperand[];
    tanh(input: MLOperand, options?: MLOperatorOptions): MLOperand;
    tile(input: MLOperand, repetitions: readonly number[], options?: MLOperatorOptions): MLOperand;
    transpose(input: MLOperand, options?: MLTransposeOptions): MLOperand;
    triangular(input: MLOperand, options?: MLTriangularOptions): MLOperand;
    where(condition: MLOperand, trueValue: MLOperand, falseValue: MLOperand, options?: MLOperatorOptions): MLOperand;
  }

  interface MLArgMinMaxOptions extends MLOperatorOptions {
    /** @default false */
    keepDimensions?: boolean;
    /** @default "int32" */
    outputDataType?: MLOperandDataType;
  }

  interface MLBatchNormalizationOptions extends MLOperatorOptions {
    scale?: MLOperand;
    bias?: MLOperand;
    /** @default 1 */
    axis?: number;
    /** @default 1e-5 */
    epsilon?: number;
  }

  interface MLBatchNormalizationSupportLimits {
    input?: MLTensorLimits;
    mean?: MLTensorLimits;
    variance?: MLTensorLimits;
    scale?: MLTensorLimits;
    bias?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLClampOptions extends MLOperatorOptions {
    minValue?: MLNumber;
    maxValue?: MLNumber;
  }

  interface MLConcatSupportLimits {
    inputs?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  type MLConv2dFilterOperandLayout = 'oihw' | 'hwio' | 'ohwi' | 'ihwo';

  interface MLConv2dOptions extends MLOperatorOptions {
    padding?: readonly number[];
    strides?: readonly number[];
    dilations?: readonly number[];
    /** @default 1 */
    groups?: number;
    /** @default "nchw" */
    inputLayout?: MLInputOperandLayout;
    /** @default "oihw" */
    filterLayout?: MLConv2dFilterOperandLayout;
    bias?: MLOperand;
  }

  interface MLConv2dSupportLimits {
    input?: MLTensorLimits;
    filter?: MLTensorLimits;
    bias?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  type MLConvTranspose2dFilterOperandLayout = 'iohw' | 'hwoi' | 'ohwi';

  interface MLConvTranspose2dOptions extends MLOperatorOptions {
    padding?: readonly number[];
    strides?: readonly number[];
    dilations?: readonly number[];
    outputPadding?: readonly number[];
    outputSizes?: readonly number[];
    /** @default 1 */
    groups?: number;
    /** @default "nchw" */
    inputLayout?: MLInputOperandLayout;
    /** @default "iohw" */
    filterLayout?: MLConvTranspose2dFilterOperandLayout;
    bias?: MLOperand;
  }

  interface MLCumulativeSumOptions extends MLOperatorOptions {
    /** @default false */
    exclusive?: boolean;
    /** @default false */
    reversed?: boolean;
  }

  interface MLLogicalNotSupportLimits {
    a?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLQuantizeDequantizeLinearSupportLimits {
    input?: MLTensorLimits;
    scale?: MLTensorLimits;
    zeroPoint?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLEluOptions extends MLOperatorOptions {
    /** @default 1 */
    alpha?: number;
  }

  interface MLGatherOptions extends MLOperatorOptions {
    /** @default 0 */
    axis?: number;
  }

  interface MLGatherSupportLimits {
    input?: MLTensorLimits;
    indices?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLGemmOptions extends MLOperatorOptions {
    c?: MLOperand;
    /** @default 1.0 */
    alpha?: number;
    /** @default 1.0 */
    beta?: number;
    /** @default false */
    aTranspose?: boolean;
    /** @default false */
    bTranspose?: boolean;
  }

  interface MLGemmSupportLimits {
    a?: MLTensorLimits;
    b?: MLTensorLimits;
    c?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  type MLGruWeightLayout = 'zrn' | 'rzn';

  type MLRecurrentNetworkActivation = 'relu' | 'sigmoid' | 'tanh';

  type MLRecurrentNetworkDirection = 'forward' | 'backward' | 'both';

  interface MLGruOptions extends MLOperatorOptions {
    bias?: MLOperand;
    recurrentBias?: MLOperand;
    initialHiddenState?: MLOperand;
    /** @default true */
    resetAfter?: boolean;
    /** @default false */
    returnSequence?: boolean;
    /** @default "forward" */
    direction?: MLRecurrentNetworkDirection;
    /** @default "zrn" */
    layout?: MLGruWeightLayout;
    activations?: readonly MLRecurrentNetworkActivation[];
  }

  interface MLGruSupportLimits {
    input?: MLTensorLimits;
    weight?: MLTensorLimits;
    recurrentWeight?: MLTensorLimits;
    bias?: MLTensorLimits;
    recurrentBias?: MLTensorLimits;
    initialHiddenState?: MLTensorLimits;
    output0?: MLTensorLimits;
    output1?: MLTensorLimits;
  }

  interface MLGruCellOptions extends MLOperatorOptions {
    bias?: MLOperand;
    recurrentBias?: MLOperand;
    /** @default true */
    resetAfter?: boolean;
    /** @default "zrn" */
    layout?: MLGruWeightLayout;
    activations?: readonly MLRecurrentNetworkActivation[];
  }

  interface MLGruCellSupportLimits {
    input?: MLTensorLimits;
    weight?: MLTensorLimits;
    recurrentWeight?: MLTensorLimits;
    hiddenState?: MLTensorLimits;
    bias?: MLTensorLimits;
    recurrentBias?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLHardSigmoidOptions extends MLOperatorOptions {
    /** @default 0.2 */
    alpha?: number;
    /** @default 0.5 */
    beta?: number;
  }

  interface MLInstanceNormalizationOptions extends MLOperatorOptions {
    scale?: MLOperand;
    bias?: MLOperand;
    /** @default 1e-5 */
    epsilon?: number;
    /** @default "nchw" */
    layout?: MLInputOperandLayout;
  }

  interface MLNormalizationSupportLimits {
    input?: MLTensorLimits;
    scale?: MLTensorLimits;
    bias?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLLayerNormalizationOptions extends MLOperatorOptions {
    scale?: MLOperand;
    bias?: MLOperand;
    axes?: readonly number[];
    /** @default 1e-5 */
    epsilon?: number;
  }

  interface MLLeakyReluOptions extends MLOperatorOptions {
    /** @default 0.01 */
    alpha?: number;
  }

  interface MLLinearOptions extends MLOperatorOptions {
    /** @default 1 */
    alpha?: number;
    /** @default 0 */
    beta?: number;
  }

  type MLLstmWeightLayout = 'iofg' | 'ifgo';

  interface MLLstmOptions extends MLOperatorOptions {
    bias?: MLOperand;
    recurrentBias?: MLOperand;
    peepholeWeight?: MLOperand;
    initialHiddenState?: MLOperand;
    initialCellState?: MLOperand;
    /** @default false */
    returnSequence?: boolean;
    /** @default "forward" */
    direction?: MLRecurrentNetworkDirection;
    /** @default "iofg" */
    layout?: MLLstmWeightLayout;
    activations?: readonly MLRecurrentNetworkActivation[];
  }

  interface MLLstmSupportLimits {
    input?: MLTensorLimits;
    weight?: MLTensorLimits;
    recurrentWeight?: MLTensorLimits;
    bias?: MLTensorLimits;
    recurrentBias?: MLTensorLimits;
    peepholeWeight?: MLTensorLimits;
    initialHiddenState?: MLTensorLimits;
    initialCellState?: MLTensorLimits;
    output0?: MLTensorLimits;
    output1?: MLTensorLimits;
    output2?: MLTensorLimits;
  }

  interface MLLstmCellOptions extends MLOperatorOptions {
    bias?: MLOperand;
    recurrentBias?: MLOperand;
    peepholeWeight?: MLOperand;
    /** @default "iofg" */
    layout?: MLLstmWeightLayout;
    activations?: readonly MLRecurrentNetworkActivation[];
  }

  interface MLLstmCellSupportLimits {
    input?: MLTensorLimits;
    weight?: MLTensorLimits;
    recurrentWeight?: MLTensorLimits;
    hiddenState?: MLTensorLimits;
    cellState?: MLTensorLimits;
    bias?: MLTensorLimits;
    recurrentBias?: MLTensorLimits;
    peepholeWeight?: MLTensorLimits;
    output0?: MLTensorLimits;
    output1?: MLTensorLimits;
  }

  type MLPaddingMode = 'constant' | 'edge' | 'reflection';

  interface MLPadOptions extends MLOperatorOptions {
    /** @default "constant" */
    mode?: MLPaddingMode;
    /** @default 0 */
    value?: MLNumber;
  }

  type MLRoundingType = 'floor' | 'ceil';

  interface MLPool2dOptions extends MLOperatorOptions {
    windowDimensions?: readonly number[];
    padding?: readonly number[];
    strides?: readonly number[];
    dilations?: readonly number[];
    /** @default "nchw" */
    layout?: MLInputOperandLayout;
    /** @default "floor" */
    outputShapeRounding?: MLRoundingType;
    outputSizes?: readonly number[];
  }

  interface MLPreluSupportLimits {
    input?: MLTensorLimits;
    slope?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLReduceOptions extends MLOperatorOptions {
    axes?: readonly number[];
    /** @default false */
    keepDimensions?: boolean;
  }

  type MLInterpolationMode = 'nearest-neighbor' | 'linear';

  interface MLResample2dOptions extends MLOperatorOptions {
    /** @default "nearest-neighbor" */
    mode?: MLInterpolationMode;
    scales?: readonly number[];
    sizes?: readonly number[];
    axes?: readonly number[];
  }

  interface MLReverseOptions extends MLOperatorOptions {
    axes?: readonly number[];
  }

  interface MLScatterOptions extends MLOperatorOptions {
    /** @default 0 */
    axis?: number;
  }

  interface MLScatterSupportLimits {
    input?: MLTensorLimits;
    indices?: MLTensorLimits;
    updates?: MLTensorLimits;
    output?: MLTensorLimits;
  }

  interface MLSliceOptions extends MLOperatorOptions {
    strides?: readonly number[];
  }

  interface MLSplitOptions extends MLOperatorOptions {
    /** @default 0 */
    axis?: number;
  }

  interface MLSplitSupportLimits {
    input?: MLTensorLimits;
    outputs?: MLTensorLimits;
  }

  interface MLTransposeOptions extends MLOperatorOptions {
    permutation?: readonly number[];
  }

  interface MLTriangularOptions extends MLOperatorOptions {
    /** @default true */
    upper?: boolean;
    /** @default 0 */
    diagonal?: number;
  }

  interface MLWhereSupportLimits {
    condition?: MLTensorLimits;
    trueValue?: MLTensorLimits;
    falseValue?: MLTensorLimits;
    output?: MLTensorLimits;
  }
}
