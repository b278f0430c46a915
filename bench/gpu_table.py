"""Prints the tables of bench/gpu.html runs (the results.jsonl of bench/gpu_machine.sh): per build
tag, the kernel shapes with ours beside tfjs-webgpu, onnxruntime-web's WebGPU EP and a plain WGSL
kernel (ms per product: the steady time a run where measured, then in brackets the time of the
timed runs including their final read back; a '!' marks a failed check), the WGSL lab's
kernels (examples/wgsl_lab.rs), the MoE
tokens/s per memory mode, and the small-tensor round trips; with SMI.csv (gpu_machine.sh's
nvidia-smi samples), the median SM clock during each timed window.
usage: gpu_table.py RESULTS.jsonl [SMI.csv]"""
import datetime
import json
import statistics
import sys

DIMS = {'mm1024': (1024, 1024, 1024), 'mm2048': (2048, 2048, 2048), 'mm4096': (4096, 4096, 4096),
        'gemv': (1, 4096, 4096), 'gemv8192': (1, 8192, 8192)}
DIMS.update({f'{name}h': dims for name, dims in DIMS.items()})  # the float16 shapes
IMPLS = ['ours', 'tfjs', 'ort', 'wgsl']


def steady(r):
    """A result's steady ms a run (slopeMs, the final read's latency left out) when measured,
    else its ms over the timed runs and their read."""
    return r.get('slopeMs', r.get('ms')) if r else None


def cell(r):
    """The steady ms, with the ms of the runs and their read in brackets when both exist."""
    if not r or 'ms' not in r:
        return 'error' if r else ''
    both = f"{r['slopeMs']:.3f} ({r['ms']:.3f})" if 'slopeMs' in r else f"{r['ms']:.3f}"
    return both + ('' if r.get('check', {}).get('ok') else ' !')


def rate(shape, ms):
    if shape not in DIMS:
        return ''
    m, k, n = DIMS[shape]
    if m == 1:
        return f"{(2 if shape.endswith('h') else 4) * k * n / (ms * 1e6):.0f} GB/s"
    return f'{2 * m * k * n / (ms * 1e9):.1f} TFLOP/s'


# (seconds since the epoch, SM MHz): nvidia-smi prints its timestamps in local time, so read
# them on the machine that wrote them.
samples = []
for line in open(sys.argv[2]) if len(sys.argv) > 2 else []:
    f = [x.strip() for x in line.split(',')]
    try:
        samples.append((datetime.datetime.strptime(f[0], '%Y/%m/%d %H:%M:%S.%f').timestamp(), float(f[1])))
    except (ValueError, IndexError):
        pass


def clock(r):
    """The median SM clock (MHz) sampled inside the result's timed window, or ''."""
    w = (r or {}).get('window')
    inside = [mhz for t, mhz in samples if w and w[0] / 1000 <= t <= w[1] / 1000]
    return f'{statistics.median(inside):.0f}' if inside else ''


runs = [json.loads(line) for line in open(sys.argv[1]) if '"stage":"gpu"' in line]
for run in runs:
    print(f"\n### {run.get('tag') or 'run'}: {run.get('adapter', {}).get('vendor')} {run.get('error') or ''}\n")
    print('| shape | ours ms | ours rate | tfjs | ort | wgsl | best peer / ours | SM MHz: ours, tfjs, ort, wgsl |')
    print('|---|---:|---:|---:|---:|---:|---:|---|')
    for shape, c in run['cells'].items():
        ours = steady(c.get('ours'))
        peers = [steady(c[i]) for i in ('tfjs', 'ort') if 'ms' in c.get(i, {})]
        ratio = f'{min(peers) / ours:.2f}' if ours and peers else ''
        print(f"| {shape} | {cell(c.get('ours'))} | {rate(shape, ours) if ours else ''} | "
              f"{cell(c.get('tfjs'))} | {cell(c.get('ort'))} | {cell(c.get('wgsl'))} | {ratio} | "
              f"{', '.join(clock(c.get(i)) for i in IMPLS)} |")
    moe = ', '.join(f"{mode} {v['tokensPerSecond']:.1f}" + ('' if v.get('ok') else ' (WRONG TOKENS)')
                    if 'tokensPerSecond' in v else f"{mode} {v.get('error')}" for mode, v in run.get('moe', {}).items())
    print(f'\nMoE tokens/s: {moe}')
    for mode, v in run.get('moe', {}).items():
        if v.get('gpuMsPerToken'):
            g = v['gpuMsPerToken']
            print(f"MoE {mode}: n dispatches + one read, 1: {g['one']} ms, 16: {g['sixteen']} ms, GPU a token (slope): {g['slope']} ms; "
                  f"a step's read wait {v.get('perStepMs', {}).get('readWait')} ms")
    print('round trips (ms): ' + '; '.join(f'{p} {ms:.3f}' for p, ms in run.get('roundtrip', [])))
    for r in run.get('memory', {}).get('rows', []):
        print(f"memory {r['mib']} MiB: writeBuffer {r['raw']:.2f} ms, create + writeBuffer {r['rawCreate']:.2f}, "
              f"swapIn {r['swapIn']:.2f} ({100 * r['raw'] / r['swapIn']:.0f}% of writeBuffer), "
              f"at the budget {r['swapInBudget']:.2f} ({100 * r['raw'] / r['swapInBudget']:.0f}%), swapOut {r['swapOut']:.2f}, rebuild {r['rebuild']:.1f}")
    if run.get('lab'):
        print('\n| lab shape | variant | ms | rate | SM MHz |')
        print('|---|---|---:|---:|---:|')
        for r in run['lab']:
            speed = '' if 'ms' not in r else f"{r['flops'] / (steady(r) * 1e9):.1f} TFLOP/s" if r.get('flops') else rate(r['shape'], steady(r))
            print(f"| {r['shape']} | {r['variant']} | {cell(r) if 'ms' in r else r.get('error')} | {speed} | {clock(r)} |")
