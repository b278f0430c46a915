//! Host copies of constant bytes. Natively a Rust allocation; in the browser a JS `Uint8Array`
//! can hold them instead, outside wasm linear memory (which never shrinks), so the garbage
//! collector can free them and uploads go from JS straight to `GPUQueue.writeBuffer`.

use std::cell::Cell;
use std::rc::Rc;

enum HostData {
    Native(Rc<[u8]>),
    #[cfg(target_arch = "wasm32")]
    Js(js_sys::Uint8Array),
}

/// Bytes held on the host, counted in their context's host byte total while alive.
pub struct HostBytes {
    data: HostData,
    len: u64,
    counter: Rc<Cell<u64>>,
}

impl HostBytes {
    /// Copies bytes into a host allocation counted by `counter`.
    pub fn from_slice(bytes: &[u8], counter: &Rc<Cell<u64>>) -> HostBytes {
        HostBytes::new(HostData::Native(Rc::from(bytes)), bytes.len() as u64, counter)
    }

    /// Copies bytes into host memory outside wasm memory where there is such (a JS
    /// `Uint8Array` on the web).
    pub fn outside_wasm(bytes: &[u8], counter: &Rc<Cell<u64>>) -> HostBytes {
        #[cfg(target_arch = "wasm32")]
        return HostBytes::from_js(js_sys::Uint8Array::from(bytes), counter);
        #[cfg(not(target_arch = "wasm32"))]
        HostBytes::from_slice(bytes, counter)
    }

    /// Takes a JS-owned copy (the caller made the copy; it is not shared with the page).
    #[cfg(target_arch = "wasm32")]
    pub fn from_js(array: js_sys::Uint8Array, counter: &Rc<Cell<u64>>) -> HostBytes {
        let len = array.length() as u64;
        HostBytes::new(HostData::Js(array), len, counter)
    }

    fn new(data: HostData, len: u64, counter: &Rc<Cell<u64>>) -> HostBytes {
        counter.set(counter.get() + len);
        HostBytes { data, len, counter: counter.clone() }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes as a Rust vector (a copy on the web).
    pub fn to_vec(&self) -> Vec<u8> {
        match &self.data {
            HostData::Native(b) => b.to_vec(),
            #[cfg(target_arch = "wasm32")]
            HostData::Js(a) => a.to_vec(),
        }
    }

    /// Copies the bytes into `out`, which must be as long; `false` when it is not.
    pub fn copy_to(&self, out: &mut [u8]) -> bool {
        if out.len() as u64 != self.len {
            return false;
        }
        match &self.data {
            HostData::Native(b) => out.copy_from_slice(b),
            #[cfg(target_arch = "wasm32")]
            HostData::Js(a) => a.copy_to(out),
        }
        true
    }

    /// Writes the bytes at the start of `buffer`, padding the tail to the 4-byte copy alignment.
    /// On the web a JS copy goes straight to `GPUQueue.writeBuffer`, never through wasm memory.
    pub fn upload(&self, queue: &wgpu::Queue, buffer: &wgpu::Buffer) {
        match &self.data {
            HostData::Native(bytes) => write_padded(queue, buffer, 0, bytes),
            #[cfg(target_arch = "wasm32")]
            HostData::Js(array) => {
                if let (Some(q), Some(b)) = (queue.as_webgpu(), buffer.as_webgpu()) {
                    let aligned = (self.len / 4 * 4) as u32;
                    if aligned > 0 {
                        let _ = q.write_buffer_with_f64_and_buffer_source_and_u32_and_u32(b, 0.0, array, 0, aligned);
                    }
                    if (aligned as u64) < self.len {
                        let tail = array.subarray(aligned, self.len as u32).to_vec();
                        write_padded(queue, buffer, aligned as u64, &tail);
                    }
                } else {
                    write_padded(queue, buffer, 0, &array.to_vec());
                }
            }
        }
    }
}

impl Drop for HostBytes {
    fn drop(&mut self) {
        self.counter.set(self.counter.get().saturating_sub(self.len));
    }
}

/// `queue.write_buffer` of bytes whose length need not be a multiple of 4.
pub fn write_padded(queue: &wgpu::Queue, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
    let aligned = bytes.len() / 4 * 4;
    if aligned > 0 {
        queue.write_buffer(buffer, offset, &bytes[..aligned]);
    }
    if aligned < bytes.len() {
        let mut tail = [0u8; 4];
        tail[..bytes.len() - aligned].copy_from_slice(&bytes[aligned..]);
        queue.write_buffer(buffer, offset + aligned as u64, &tail);
    }
}
