//! Peer mapping: where every PE's heap is in this PE's address space.
//!
//! - same process, same device: the peer's heap pointer as is;
//! - same process, other device: the pointer as is, after
//!   `cuCtxEnablePeerAccess` to the peer's context;
//! - other process: `cuIpcOpenMemHandle` on the handle the peer published.
//!
//! The table goes to the device as `[u64; n_pes]` (`State::peer_bases`).

use crate::bootstrap::Bootstrap;
use crate::driver::{self, IpcBytes};
use crate::heap::Heap;
use crate::{Error, Result};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// What each PE publishes about its heap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PeerInfo {
    pub pid: u32,
    pub device: u32,
    /// The GPU's UUID: tells whether two PEs share one physical GPU across processes.
    pub uuid: [u8; 16],
    pub heap_base: u64,
    pub heap_size: u64,
    /// The context handle (meaningful only inside the same process).
    pub ctx: u64,
    /// None when `cuIpcGetMemHandle` failed (only same-process peers can map it then).
    pub ipc: Option<IpcBytes>,
}

const INFO_BYTES: usize = 4 + 4 + 16 + 8 + 8 + 8 + 1 + 64;

impl PeerInfo {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(INFO_BYTES);
        v.extend_from_slice(&self.pid.to_le_bytes());
        v.extend_from_slice(&self.device.to_le_bytes());
        v.extend_from_slice(&self.uuid);
        v.extend_from_slice(&self.heap_base.to_le_bytes());
        v.extend_from_slice(&self.heap_size.to_le_bytes());
        v.extend_from_slice(&self.ctx.to_le_bytes());
        v.push(self.ipc.is_some() as u8);
        v.extend_from_slice(&self.ipc.unwrap_or([0; 64]));
        v
    }

    fn decode(b: &[u8]) -> Option<PeerInfo> {
        if b.len() != INFO_BYTES {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Some(PeerInfo {
            pid: u32_at(0),
            device: u32_at(4),
            uuid: b[8..24].try_into().unwrap(),
            heap_base: u64_at(24),
            heap_size: u64_at(32),
            ctx: u64_at(40),
            ipc: (b[48] == 1).then(|| b[49..113].try_into().unwrap()),
        })
    }
}

/// The mapped peers of one PE.
pub(crate) struct PeerMap {
    /// Each PE's heap base in this PE's address space.
    pub bases: Vec<u64>,
    /// What every PE published.
    pub infos: Vec<PeerInfo>,
    /// Device copy of `bases` (set once built).
    pub table: Option<driver::DeviceBuffer>,
    /// Mappings made with `cuIpcOpenMemHandle`, closed on drop.
    opened: Vec<u64>,
    ctx: Arc<CudaContext>,
}

impl PeerMap {
    /// Whether every PE runs on one physical GPU (same, known UUID): device
    /// code may then order with `.gpu`-scope fences (see `abi::FLAG_ONE_GPU`).
    pub fn one_gpu(&self) -> bool {
        let first = self.infos.first().map(|i| i.uuid);
        first.is_some_and(|u| u != [0; 16] && self.infos.iter().all(|i| i.uuid == u))
    }

    /// Exchanges heap descriptions and maps every peer (collective).
    pub fn build(
        boot: &dyn Bootstrap,
        ctx: &Arc<CudaContext>,
        stream: &cudarc::driver::CudaStream,
        device: usize,
        heap: &Heap,
        nvshmem: Option<&crate::nvshmem::Runtime>,
    ) -> Result<PeerMap> {
        let me = boot.rank();
        let mine = PeerInfo {
            pid: std::process::id(),
            device: device as u32,
            uuid: ctx.uuid().map(|u| u.bytes.map(|c| c as u8)).unwrap_or([0; 16]),
            heap_base: heap.base,
            heap_size: heap.size,
            ctx: ctx.cu_ctx() as u64,
            // NVSHMEM's heap is mapped to the peers by NVSHMEM (below).
            ipc: if nvshmem.is_some() { None } else { driver::ipc_get_handle(heap.base).ok() },
        };
        let all = boot.allgather(&mine.encode())?;
        let infos = all
            .iter()
            .enumerate()
            .map(|(pe, b)| {
                PeerInfo::decode(b).ok_or_else(|| Error::PeerFailed {
                    me,
                    peer: pe,
                    why: format!("sent a malformed heap description ({} bytes); mixed gpushmem versions?", b.len()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if let Some((pe, other)) = infos.iter().enumerate().find(|(_, i)| i.heap_size != heap.size) {
            return Err(Error::Mismatch {
                me,
                call: "init (symmetric heap size)",
                detail: format!("PE {me} has {} bytes, PE {pe} has {} bytes", heap.size, other.heap_size),
            });
        }
        let mut map =
            PeerMap { bases: Vec::new(), infos: Vec::new(), table: None, opened: Vec::new(), ctx: ctx.clone() };
        ctx.bind_to_thread().map_err(|source| Error::Cuda { call: "cuCtxSetCurrent".into(), source })?;
        for (pe, info) in infos.iter().enumerate() {
            let base = if pe == me {
                heap.base
            } else if let Some(nv) = nvshmem {
                // 0 where loads and stores cannot reach the peer (another node).
                nv.peer_base(pe)
            } else if info.pid == mine.pid {
                if info.device != mine.device {
                    driver::enable_peer_access(ctx.cu_device(), info.device as i32, info.ctx as _)?;
                }
                info.heap_base
            } else {
                let handle = info.ipc.as_ref().ok_or_else(|| Error::PeerFailed {
                    me,
                    peer: pe,
                    why: "could not export its heap with cuIpcGetMemHandle".into(),
                })?;
                let p = driver::ipc_open(handle).map_err(|e| {
                    e.in_context(|| format!("mapping PE {pe}'s heap (process {}, device {})", info.pid, info.device))
                })?;
                map.opened.push(p);
                p
            };
            map.bases.push(base);
        }
        let table = driver::DeviceBuffer::alloc(ctx, (8 * infos.len()) as u64)?;
        // SAFETY: `table` holds n_pes u64s.
        unsafe { driver::copy_htod(stream.cu_stream(), table.ptr, &map.bases) }?;
        map.table = Some(table);
        map.infos = infos;
        Ok(map)
    }

    /// Number of PEs that share this PE's GPU (itself included): they split its SMs.
    pub fn pes_on_device(&self, me: usize) -> usize {
        let mine = &self.infos[me];
        // Single node: PEs of other processes on the same GPU time-slice with
        // ours, so they count as sharing it too.
        self.infos.iter().filter(|i| i.device == mine.device).count()
    }
}

impl Drop for PeerMap {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        for p in self.opened.drain(..) {
            // SAFETY: opened by `build`; no kernel of ours runs any more.
            if let Err(e) = unsafe { driver::ipc_close(p) } {
                log::warn!("closing a peer heap mapping: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_roundtrip() {
        let i = PeerInfo {
            pid: 7,
            device: 3,
            uuid: [9; 16],
            heap_base: 1 << 40,
            heap_size: 1 << 30,
            ctx: 99,
            ipc: Some([5; 64]),
        };
        assert_eq!(PeerInfo::decode(&i.encode()), Some(i.clone()));
        let j = PeerInfo { ipc: None, ..i };
        assert_eq!(PeerInfo::decode(&j.encode()), Some(j));
        assert_eq!(PeerInfo::decode(&[1, 2, 3]), None);
    }
}
