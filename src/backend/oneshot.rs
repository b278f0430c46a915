//! A minimal one-shot channel whose receiver is a future (wgpu reports buffer mapping and device
//! loss through callbacks, and both native and browser code await them), and how deferred work runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// The sending half; `send` consumes it.
pub struct Sender<T>(Arc<Mutex<State<T>>>);
/// The receiving half, a future of the sent value.
pub struct Receiver<T>(Arc<Mutex<State<T>>>);

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let state = Arc::new(Mutex::new(State { value: None, waker: None }));
    (Sender(state.clone()), Receiver(state))
}

impl<T> Sender<T> {
    pub fn send(self, value: T) {
        let waker = match self.0.lock() {
            Ok(mut state) => {
                state.value = Some(value);
                state.waker.take()
            }
            Err(_) => None,
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Whether the value was sent (awaiting it then returns at once).
    pub fn is_ready(&self) -> bool {
        self.0.lock().map(|state| state.value.is_some()).unwrap_or(false)
    }
}

impl<T> Future for Receiver<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, request: &mut Context<'_>) -> Poll<T> {
        let Ok(mut state) = self.0.lock() else { return Poll::Pending };
        match state.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                state.waker = Some(request.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A flag that many futures can wait on, set once (context loss).
#[derive(Clone, Default)]
pub struct Signal(Arc<Mutex<(Option<String>, Vec<Waker>)>>);

impl Signal {
    /// Sets the signal with a message; later calls keep the first message.
    pub fn set(&self, message: String) {
        let wakers = match self.0.lock() {
            Ok(mut s) if s.0.is_none() => {
                s.0 = Some(message);
                std::mem::take(&mut s.1)
            }
            _ => Vec::new(),
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|s| s.0.clone())
    }

    /// A future resolving to the message once the signal is set.
    pub fn wait(&self) -> impl Future<Output = String> {
        SignalWait(self.clone())
    }
}

struct SignalWait(Signal);

impl Future for SignalWait {
    type Output = String;
    fn poll(self: Pin<&mut Self>, request: &mut Context<'_>) -> Poll<String> {
        let Ok(mut s) = (self.0).0.lock() else { return Poll::Pending };
        match &s.0 {
            Some(m) => Poll::Ready(m.clone()),
            None => {
                s.1.push(request.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Runs deferred work. Native sources complete at once, so natively it runs to the end inside
/// the call; in the browser it continues as its reads resolve.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn spawn(future: impl Future<Output = ()> + 'static) {
    pollster::block_on(future);
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn spawn(future: impl Future<Output = ()> + 'static) {
    wasm_bindgen_futures::spawn_local(future);
}

/// The output of `future` if it completes without waiting (it is dropped otherwise): for work
/// that waits only when a file must be read, run at once when none must.
pub(crate) fn now<T>(future: impl Future<Output = T>) -> Option<T> {
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => Some(value),
        Poll::Pending => None,
    }
}
