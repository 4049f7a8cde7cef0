//! Teams: subsets of PEs `start, start + stride, …` of a parent team
//! (`nvshmem_team_split_strided`, `nvshmem_team_split_2d`).
//!
//! **Differs from NVSHMEM:** creating and destroying a team is collective
//! over *all* PEs (not only the parent's), and every PE gets a handle —
//! a non-member's reports `my_pe() == None`. That keeps the choice of team
//! slot (and so of its sync words in the heap) the same on every PE with no
//! extra agreement, at the cost of involving PEs outside the parent.
//!
//! Each team owns one of [`MAX_TEAMS`] sync slots at the start of the heap
//! (slot 0 is the world team); a new team's slot is zeroed on every PE
//! before any PE returns from the split.

use crate::error::CudaContext as _;
use crate::{driver, Error, Result, Shmem};
use cudarc::driver::{CudaContext, CudaStream};
use gpushmem_kernels::abi::{
    TeamDesc, ENGINE_TEAMS_OFFSET, ENGINE_TEAM_INVALID, MAX_TEAMS, NOT_A_MEMBER, TEAM_SLOT_BYTES, TEAM_TABLE_BYTES,
};
use std::sync::{Arc, Mutex};

/// A team of PEs, as the host holds it. Pass [`Team::handle`] to kernels
/// (the device's `Team(handle)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Team {
    slot: u32,
    desc: TeamDesc,
}

impl Team {
    /// The kernel argument that names this team on the device.
    pub fn handle(&self) -> u32 {
        self.slot
    }

    /// Number of PEs in the team (`nvshmem_team_n_pes`).
    pub fn n_pes(&self) -> usize {
        self.desc.size as usize
    }

    /// This PE's number in the team, `None` if it is not a member (`nvshmem_team_my_pe`).
    pub fn my_pe(&self) -> Option<usize> {
        (self.desc.my_index != NOT_A_MEMBER).then_some(self.desc.my_index as usize)
    }

    /// The world PE of team member `i`.
    pub fn world_pe(&self, i: usize) -> Option<usize> {
        (i < self.n_pes()).then(|| self.desc.world_pe(i as u32) as usize)
    }

    /// The number in `dest` of this team's member `pe` (`nvshmem_team_translate_pe`).
    pub fn translate_pe(&self, pe: usize, dest: &Team) -> Option<usize> {
        self.world_pe(pe).and_then(|w| dest.desc.index_of(w as u32)).map(|i| i as usize)
    }
}

/// The team slots of one PE: the host's copy and the device table.
pub(crate) struct TeamTable {
    /// Device `[TeamDesc; MAX_TEAMS]`, then `[i32; MAX_TEAMS]` of engine
    /// handles ([`gpushmem_kernels::abi::ENGINE_TEAMS_OFFSET`]).
    pub table: driver::DeviceBuffer,
    slots: Mutex<Slots>,
}

/// The host's copy of the device team table.
pub(crate) struct Slots {
    /// Each slot's team as this PE sees it.
    pub desc: [TeamDesc; MAX_TEAMS as usize],
    /// Each slot's NVSHMEM team handle (NVSHMEM engine; else all invalid).
    pub engine: [i32; MAX_TEAMS as usize],
}

const UNUSED: TeamDesc = TeamDesc { start: 0, stride: 0, size: 0, my_index: NOT_A_MEMBER };

impl TeamTable {
    /// The table with the world team in slot 0.
    /// `engine_world` is the world team's engine handle (`NVSHMEM_TEAM_WORLD`,
    /// 0, on the NVSHMEM engine; [`ENGINE_TEAM_INVALID`] on the native one).
    pub fn new(
        ctx: &Arc<CudaContext>,
        stream: &CudaStream,
        my_pe: usize,
        n_pes: usize,
        engine_world: i32,
    ) -> Result<TeamTable> {
        let mut desc = [UNUSED; MAX_TEAMS as usize];
        desc[0] = TeamDesc { start: 0, stride: 1, size: n_pes as u32, my_index: my_pe as u32 };
        let mut engine = [ENGINE_TEAM_INVALID; MAX_TEAMS as usize];
        engine[0] = engine_world;
        let table = driver::DeviceBuffer::alloc(ctx, TEAM_TABLE_BYTES)?;
        // SAFETY: `table` holds MAX_TEAMS descriptors, then MAX_TEAMS handles.
        unsafe {
            driver::copy_htod(stream.cu_stream(), table.ptr, bytemuck::cast_slice::<TeamDesc, u8>(&desc))?;
            driver::copy_htod(
                stream.cu_stream(),
                table.ptr + ENGINE_TEAMS_OFFSET,
                bytemuck::cast_slice::<i32, u8>(&engine),
            )
        }?;
        Ok(TeamTable { table, slots: Mutex::new(Slots { desc, engine }) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A local check's error, for the exchange (the original is returned afterwards).
fn clone_err(e: &Error) -> Error {
    Error::Config { name: "local check".into(), value: String::new(), why: e.to_string() }
}

/// The world-PE layout of a new team and this PE's place in it (never a
/// member when it is not a member of the parent, whose layout it may not know).
fn child_desc(parent: &TeamDesc, start: u32, stride: u32, size: u32, my_pe: u32) -> TeamDesc {
    let mut d =
        TeamDesc { start: parent.world_pe(start), stride: parent.stride * stride, size, my_index: NOT_A_MEMBER };
    if parent.my_index == NOT_A_MEMBER {
        return d;
    }
    if let Some(i) = d.index_of(my_pe) {
        d.my_index = i;
    }
    d
}

impl Shmem {
    /// All PEs (`NVSHMEM_TEAM_WORLD`).
    pub fn team_world(&self) -> Team {
        Team { slot: 0, desc: self.teams.lock().desc[0] }
    }

    fn check_team(&self, t: &Team, call: &str) -> Result<TeamDesc> {
        let d = self.teams.lock().desc.get(t.slot as usize).copied().unwrap_or(UNUSED);
        if d.size == 0 || d != t.desc {
            return Err(Error::Config {
                name: call.into(),
                value: format!("team slot {}", t.slot),
                why: "not a live team of this PE (destroyed, or from another job)".into(),
            });
        }
        Ok(d)
    }

    /// Fails on the NVSHMEM engine when PEs share this GPU: NVSHMEM 3.4.5
    /// cannot make teams in that mode ("limited MPG", several processes per
    /// GPU) and ends the process instead of returning an error (seen on the
    /// H200), so gpushmem refuses first. Checked before the agreement, so
    /// every PE fails together.
    fn engine_can_split(&self, p: TeamDesc) -> Result<TeamDesc> {
        if self.nvshmem.is_some() && self.pes_on_device() > 1 {
            return Err(Error::Engine {
                why: format!(
                    "team_split: NVSHMEM cannot create teams while several PEs share a GPU ({} PEs on this GPU: \
                     NVSHMEM's limited multiple-processes-per-GPU mode); run one PE per GPU, or use the native engine",
                    self.pes_on_device()
                ),
            });
        }
        Ok(p)
    }

    /// The lowest `count` free slots (the same on every PE: slots are taken
    /// and freed collectively).
    fn free_slots(&self, count: usize) -> Result<Vec<u32>> {
        let table = self.teams.lock();
        let free: Vec<u32> = (1..MAX_TEAMS).filter(|&s| table.desc[s as usize].size == 0).take(count).collect();
        if free.len() < count {
            return Err(Error::Config {
                name: "team_split".into(),
                value: format!("{count} new team(s)"),
                why: format!("all {MAX_TEAMS} team slots are in use: destroy teams that are no longer needed"),
            });
        }
        Ok(free)
    }

    /// Gives `descs[k]` (this PE's view of each new team, with its engine
    /// handle) the lowest free slots, zeroes their sync words, installs them
    /// on the device; collective.
    fn install_teams(&self, descs: &[(TeamDesc, i32)]) -> Result<Vec<Team>> {
        let slots = self.free_slots(descs.len())?;
        let stream = self.stream().cu_stream();
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        for (&slot, (d, engine)) in slots.iter().zip(descs) {
            // SAFETY: the slot lies in the reserved start of this PE's heap.
            unsafe { driver::zero(stream, self.heap.base + TeamDesc::slot_offset(slot), TEAM_SLOT_BYTES) }?;
            self.write_slot(slot, d, *engine)?;
        }
        // Nobody uses a new team before every PE has zeroed its slot.
        self.bootstrap().barrier()?;
        Ok(slots.into_iter().zip(descs).map(|(slot, &(desc, _))| Team { slot, desc }).collect())
    }

    /// Slot `slot` of the host and device tables becomes `d` with engine handle `engine`.
    fn write_slot(&self, slot: u32, d: &TeamDesc, engine: i32) -> Result<()> {
        let stream = self.stream().cu_stream();
        let at = self.teams.table.ptr + slot as u64 * std::mem::size_of::<TeamDesc>() as u64;
        let engine_at = self.teams.table.ptr + ENGINE_TEAMS_OFFSET + 4 * slot as u64;
        // SAFETY: entry `slot` of both arrays of the device table.
        unsafe {
            driver::copy_htod(stream, at, bytemuck::bytes_of(d))?;
            driver::copy_htod(stream, engine_at, bytemuck::bytes_of(&engine))
        }?;
        let mut t = self.teams.lock();
        t.desc[slot as usize] = *d;
        t.engine[slot as usize] = engine;
        Ok(())
    }

    /// The engine handle of the team in `slot` (NVSHMEM engine).
    fn engine_team(&self, slot: u32) -> i32 {
        self.teams.lock().engine.get(slot as usize).copied().unwrap_or(ENGINE_TEAM_INVALID)
    }

    /// Collective over all PEs: the team of `parent`'s members `start`,
    /// `start + stride`, … (`size` of them) (`nvshmem_team_split_strided`). Every PE
    /// gets the handle; non-members' report `my_pe() == None`. With
    /// `size` 1 the stride is unused (the team's stride is 1).
    ///
    /// # Errors
    /// Every PE fails together. The parent's members check the layout
    /// ([`crate::args::team_split_strided`]): [`Error::Config`] for `size` or
    /// `stride` 0 or a member outside the parent, [`Error::ArgumentOverflow`]
    /// for a layout past the device's 32-bit PE numbers; a PE whose own check
    /// passed (or a non-member, which does not check the range) gets
    /// [`Error::Mismatch`] naming the PE that rejected its arguments.
    /// [`Error::Mismatch`] also when PEs pass different arguments, and
    /// [`Error::Config`] when no team slot is free.
    pub fn team_split_strided(&self, parent: &Team, start: usize, stride: usize, size: usize) -> Result<Team> {
        let p = self.check_team(parent, "team_split_strided").and_then(|p| self.engine_can_split(p));
        let local = p.and_then(|p| {
            // PEs outside the parent may hold a placeholder layout: only members check the range.
            let member = (p.my_index != NOT_A_MEMBER).then_some(p.size);
            crate::args::team_split_strided(start, stride, size, member).map(|child| (p, child))
        });
        let args = [
            ("parent team", parent.slot as u64),
            ("start", start as u64),
            ("stride", stride as u64),
            ("size", size as u64),
        ];
        let agreed = self.agree_checked("team_split_strided", &args, local.as_ref().map(|_| ()).map_err(clone_err));
        // This PE's own error first (the exchange only has its copy as text).
        let (p, (start, stride, size)) = local?;
        agreed?;
        let d = child_desc(&p, start, stride, size, self.my_pe() as u32);
        self.free_slots(1)?; // (before NVSHMEM makes a team that would then leak)
                             // NVSHMEM's split is collective over the parent's members only.
        let engine = match &self.nvshmem {
            Some(rt) if p.my_index != NOT_A_MEMBER => {
                rt.team_split_strided(self.engine_team(parent.slot), start as usize, stride as usize, size as usize)?
            }
            _ => ENGINE_TEAM_INVALID,
        };
        Ok(self.install_teams(&[(d, engine)])?.remove(0))
    }

    /// Collective over all PEs: splits `parent` into rows of `xrange`
    /// consecutive members (the x team) and the columns across them (the y
    /// team) (`nvshmem_team_split_2d`); returns (x, y) as this PE sees them.
    /// `xrange` larger than the parent is clamped to it (any `usize`, never truncated).
    ///
    /// # Errors
    /// Every PE fails together: [`Error::Config`] for `xrange` 0
    /// ([`crate::args::team_split_2d`]) on the PEs that checked it, and
    /// [`Error::Mismatch`] naming the rejecting PE on the others;
    /// [`Error::Mismatch`] when PEs pass different arguments; [`Error::Config`]
    /// when no team slot is free.
    pub fn team_split_2d(&self, parent: &Team, xrange: usize) -> Result<(Team, Team)> {
        let local = self
            .check_team(parent, "team_split_2d")
            .and_then(|p| self.engine_can_split(p))
            .and_then(|p| crate::args::team_split_2d(xrange, p.size).map(|x| (p, x)));
        let args = [("parent team", parent.slot as u64), ("xrange", xrange as u64)];
        let agreed = self.agree_checked("team_split_2d", &args, local.as_ref().map(|_| ()).map_err(clone_err));
        // This PE's own error first (the exchange only has its copy as text).
        let (p, x) = local?;
        agreed?;
        let n = p.size;
        let me = self.my_pe() as u32;
        let (xd, yd) = match p.index_of(me) {
            Some(i) => {
                let row = i / x * x;
                let col = i % x;
                (child_desc(&p, row, 1, x.min(n - row), me), child_desc(&p, col, x, (n - col).div_ceil(x), me))
            }
            // Outside the parent: member of neither; a size of 1 keeps the slot marked in use.
            None => (TeamDesc { size: 1, stride: 1, ..UNUSED }, TeamDesc { size: 1, stride: 1, ..UNUSED }),
        };
        self.free_slots(2)?;
        let (xe, ye) = match &self.nvshmem {
            Some(rt) if p.my_index != NOT_A_MEMBER => rt.team_split_2d(self.engine_team(parent.slot), xrange)?,
            _ => (ENGINE_TEAM_INVALID, ENGINE_TEAM_INVALID),
        };
        let t = self.install_teams(&[(xd, xe), (yd, ye)])?;
        Ok((t[0], t[1]))
    }

    /// Collective over all PEs: frees `team`'s slot (`nvshmem_team_destroy`).
    /// No kernel may use it afterwards. The world team cannot be destroyed.
    pub fn team_destroy(&self, team: Team) -> Result<()> {
        let local = self.check_team(&team, "team_destroy").and_then(|_| {
            if team.slot == 0 {
                return Err(Error::Config {
                    name: "team_destroy".into(),
                    value: "TEAM_WORLD".into(),
                    why: "the world team cannot be destroyed".into(),
                });
            }
            Ok(())
        });
        self.agree_checked("team_destroy", &[("team", team.slot as u64)], local)?;
        if let Some(rt) = &self.nvshmem {
            rt.team_destroy(self.engine_team(team.slot));
        }
        self.context().bind_to_thread().cuda("cuCtxSetCurrent")?;
        self.write_slot(team.slot, &UNUSED, ENGINE_TEAM_INVALID)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(n: u32, me: u32) -> TeamDesc {
        TeamDesc { start: 0, stride: 1, size: n, my_index: me }
    }

    #[test]
    fn strided_layout_and_translation() {
        // Odd PEs of 8: 1, 3, 5, 7.
        let d = child_desc(&world(8, 5), 1, 2, 4, 5);
        assert_eq!((d.start, d.stride, d.size, d.my_index), (1, 2, 4, 2));
        assert_eq!(child_desc(&world(8, 4), 1, 2, 4, 4).my_index, NOT_A_MEMBER);
        // A team of a team: members 1 and 3 of the odd team = world 3 and 7.
        let dd = child_desc(&d, 1, 2, 2, 7);
        assert_eq!((dd.start, dd.stride, dd.size, dd.my_index), (3, 4, 2, 1));
        let odd = Team { slot: 1, desc: d };
        let sub = Team { slot: 2, desc: dd };
        assert_eq!(odd.translate_pe(1, &sub), Some(0));
        assert_eq!(odd.translate_pe(0, &sub), None);
        assert_eq!(sub.translate_pe(1, &odd), Some(3));
        assert_eq!(odd.world_pe(3), Some(7));
        assert_eq!(odd.world_pe(4), None);
    }
}
