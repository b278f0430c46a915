// The page side: starts the worker, posts an input, shows the steps and the result. Nothing
// WebNN runs on the main thread.
const $ = (id) => document.getElementById(id);
const log = (text) => { $('log').append(Object.assign(document.createElement('li'), { textContent: text })); };

const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
worker.onerror = (e) => {
  log(`worker error: ${e.message}`);
  document.body.dataset.state = 'error';
};
worker.onmessage = ({ data }) => {
  if (data.type === 'step') log(data.what);
  else if (data.type === 'error') {
    log(`${data.name}: ${data.message}`);
    document.body.dataset.state = 'error';
  } else if (data.type === 'result') {
    $('result').textContent = data.first.map((v) => v.toFixed(6)).join(', ');
    $('result').dataset.result = JSON.stringify(data);
    $('memory').textContent = JSON.stringify(data.memoryInfo);
    document.body.dataset.state = 'done';
  }
};
const input = [0.5, -1, 2, 0, 1, -0.5, 0.25, 3];
$('input').textContent = input.join(', ');
worker.postMessage({ type: 'run', values: input });
