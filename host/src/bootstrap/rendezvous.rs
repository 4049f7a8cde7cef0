//! Where PE 0's socket lives when no `GPUSHMEM_BOOTSTRAP` names it: a directory
//! only this user can enter, so that no other local user can sit at the path
//! before PE 0 does (or listen there instead of it).
//!
//! The directory is `$XDG_RUNTIME_DIR/gpushmem` when `XDG_RUNTIME_DIR` is set
//! and private (systemd makes it per user, mode 0700), else
//! `$TMPDIR/gpushmem-<uid>` (`/tmp` without `TMPDIR`). Whichever it is, every
//! PE creates it with mode 0700 if it is missing and checks it before use: a
//! real directory (not a symlink), owned by this user, no access for group or
//! others. Anything else is [`Error::BootstrapRefused`] naming the path and
//! what is wrong; nothing is repaired or removed, since another user may own it.
//!
//! Only the final component is checked: the directories above it (`/tmp`,
//! `$XDG_RUNTIME_DIR`'s parents) are taken as they are. This directory is
//! defence in depth: what protects the job's data is that both ends check the
//! other's user id (`SO_PEERCRED`) before sending anything and prove the job's
//! secret ([`super::auth`]), wherever the socket lives.
//!
//! "This user" is the effective user id throughout: the one the kernel records
//! for `SO_PEERCRED` and as the owner of the files and directories we create.

use crate::{Error, Result};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// This process's effective user id: the one `SO_PEERCRED` reports to the
/// other end, and the owner of the files this process creates.
pub(crate) fn my_euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// The private directory for default rendezvous paths (see the module docs);
/// `get` reads the environment.
pub(crate) fn default_dir(get: &impl Fn(&str) -> Option<String>) -> PathBuf {
    let uid = my_euid();
    if let Some(xdg) = get("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|p| p.is_absolute()) {
        match std::fs::symlink_metadata(&xdg).map_err(|e| e.to_string()).and_then(|m| why_not_private(&m, uid)) {
            Ok(()) => return xdg.join("gpushmem"),
            Err(why) => {
                log::debug!("XDG_RUNTIME_DIR={} is not private ({why}); using the temporary directory", xdg.display())
            }
        }
    }
    let tmp = get("TMPDIR").map(PathBuf::from).filter(|p| p.is_absolute()).unwrap_or_else(|| "/tmp".into());
    tmp.join(format!("gpushmem-{uid}"))
}

/// What keeps `meta` (from `lstat`) from being a private directory of `uid`.
fn why_not_private(meta: &std::fs::Metadata, uid: u32) -> std::result::Result<(), String> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err("is a symbolic link, not a directory".into());
    }
    if !ft.is_dir() {
        return Err("is not a directory".into());
    }
    if meta.uid() != uid {
        return Err(format!("is owned by uid {}, not by this user (uid {uid})", meta.uid()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!("has mode {mode:04o}: group or others may enter it (expected 0700)"));
    }
    Ok(())
}

/// Creates `dir` (mode 0700, parents must exist) if missing, then checks that it
/// is a private directory of this user; PE `me` reports the failure.
pub(crate) fn ensure_private_dir(dir: &Path, me: usize) -> Result<()> {
    let refused = |why: String| Error::BootstrapRefused { me, path: dir.to_path_buf(), why };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => log::debug!("PE {me}: created the rendezvous directory {}", dir.display()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refused(format!("cannot create the private rendezvous directory: {e}"))),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| refused(format!("cannot inspect it: {e}")))?;
    why_not_private(&meta, my_euid()).map_err(|why| {
        refused(format!(
            "{why}; the bootstrap will not meet in a directory other users can enter or control \
             (remove it if it is yours, or set GPUSHMEM_BOOTSTRAP to a socket path in a private directory)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpushmem-rdv-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_file(&d);
        d
    }

    #[test]
    fn creates_and_accepts_a_private_dir() {
        let d = scratch("ok");
        ensure_private_dir(&d, 0).unwrap();
        let mode = std::fs::metadata(&d).unwrap().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        // A second PE finds it there and accepts it.
        ensure_private_dir(&d, 1).unwrap();
        std::fs::remove_dir(&d).unwrap();
    }

    #[test]
    fn refuses_open_modes_symlinks_and_files() {
        let d = scratch("mode");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = ensure_private_dir(&d, 1).unwrap_err().to_string();
        assert!(e.contains("mode 0755") && e.contains(&d.display().to_string()), "{e}");
        std::fs::remove_dir(&d).unwrap();

        let target = scratch("target");
        std::fs::create_dir(&target).unwrap();
        let link = scratch("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = ensure_private_dir(&link, 0).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir(&target).unwrap();

        let f = scratch("file");
        std::fs::write(&f, b"x").unwrap();
        let e = ensure_private_dir(&f, 0).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        std::fs::remove_file(&f).unwrap();
    }

    #[test]
    fn xdg_runtime_dir_only_when_private() {
        let xdg = scratch("xdg");
        std::fs::create_dir(&xdg).unwrap();
        let xs = xdg.to_str().unwrap().to_string();
        let get = |k: &str| match k {
            "XDG_RUNTIME_DIR" => Some(xs.clone()),
            "TMPDIR" => Some("/var/tmp".into()),
            _ => None,
        };
        std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(default_dir(&get), xdg.join("gpushmem"));
        std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(default_dir(&get), PathBuf::from(format!("/var/tmp/gpushmem-{}", my_euid())));
        std::fs::remove_dir(&xdg).unwrap();
        assert_eq!(default_dir(&|_: &str| None), PathBuf::from(format!("/tmp/gpushmem-{}", my_euid())));
    }
}
