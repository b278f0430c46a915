// Times the MLContext calls a token loop makes, from the page: wraps dispatch(), writeTensor()
// and readTensor() on `proto` (MLContext.prototype of the realm the loop runs in) and returns the
// tally { name: [milliseconds, calls] }: the time inside each call before it returns, and in
// readWait each read until its promise resolves. Used by bench/moe_token.mjs and bench/gpu.html.
export function timeCalls(proto) {
  const tally = { dispatch: [0, 0], writeTensor: [0, 0], readTensor: [0, 0], readWait: [0, 0] };
  for (const name of ['dispatch', 'writeTensor']) {
    const f = proto[name];
    proto[name] = function (...args) {
      const start = performance.now();
      try {
        return f.apply(this, args);
      } finally {
        tally[name][0] += performance.now() - start;
        tally[name][1]++;
      }
    };
  }
  const read = proto.readTensor;
  proto.readTensor = function (...args) {
    const start = performance.now();
    const promise = read.apply(this, args);
    tally.readTensor[0] += performance.now() - start;
    tally.readTensor[1]++;
    return promise.then((value) => {
      tally.readWait[0] += performance.now() - start;
      tally.readWait[1]++;
      return value;
    });
  };
  return tally;
}
