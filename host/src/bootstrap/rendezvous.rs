//! Where PE 0's socket lives when no `GPUSHMEM_BOOTSTRAP` names it: a directory
//! only this user can enter, so that no other local user can sit at the path
//! before PE 0 does (or listen there instead of it).
//!
//! The directory is `gpushmem` in this user's runtime directory when there is a
//! private one: `$XDG_RUNTIME_DIR`, or when that is unset `/run/user/<uid>`
//! (systemd-logind makes it per user, mode 0700, and no other user can make
//! it: launchers such as `srun` or `ssh` often lose the variable, not the
//! directory). Else `$TMPDIR/gpushmem-<uid>` (`/tmp` without `TMPDIR`), a name
//! another user can take first. Whichever it is, every PE creates it with mode
//! 0700 if it is missing and checks it before use: a real directory (not a
//! symlink), owned by this user, no access for group or others. Anything else
//! is [`Error::BootstrapRefused`] naming the path, what is wrong and what to do
//! (for another user's directory: ask an administrator, or point
//! `XDG_RUNTIME_DIR`, `TMPDIR` or `GPUSHMEM_BOOTSTRAP` elsewhere); nothing is
//! repaired or removed, since another user may own it.
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

/// Where systemd-logind makes each user's runtime directory, `<this>/<uid>`.
const RUN_USER: &str = "/run/user";

/// The private directory for default rendezvous paths (see the module docs);
/// `get` reads the environment.
pub(crate) fn default_dir(get: &impl Fn(&str) -> Option<String>) -> PathBuf {
    default_dir_in(get, Path::new(RUN_USER))
}

/// [`default_dir`], with per-user runtime directories under `run_user`.
fn default_dir_in(get: &impl Fn(&str) -> Option<String>, run_user: &Path) -> PathBuf {
    let uid = my_euid();
    let runtime = match get("XDG_RUNTIME_DIR") {
        Some(xdg) => Some(PathBuf::from(xdg)).filter(|p| p.is_absolute()),
        None => Some(run_user.join(uid.to_string())),
    };
    if let Some(dir) = runtime {
        match std::fs::symlink_metadata(&dir).map_err(|e| e.to_string()).and_then(|m| why_not_private(&m, uid)) {
            Ok(()) => return dir.join("gpushmem"),
            Err(why) => {
                log::debug!("runtime directory {} is not private ({why}); using the temporary directory", dir.display())
            }
        }
    }
    let tmp = get("TMPDIR").map(PathBuf::from).filter(|p| p.is_absolute()).unwrap_or_else(|| "/tmp".into());
    tmp.join(format!("gpushmem-{uid}"))
}

/// A warning when the explicit rendezvous `path`'s directory is writable by
/// group or others: any such user can take the path first (a squatter, which
/// the checks turn away but which stops the job) or put a link there.
pub(crate) fn shared_dir_warning(path: &Path) -> Option<String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mode = std::fs::metadata(dir).ok()?.mode() & 0o7777;
    (mode & 0o022 != 0).then(|| {
        format!(
            "the bootstrap socket {} is in {}, which group or others may write (mode {mode:04o}): another user \
             can take the path first and stop this job (nothing is sent to a process of another user, nor through \
             a link); a path in a private directory, or no GPUSHMEM_BOOTSTRAP (the default path is private), \
             avoids it",
            path.display(),
            dir.display()
        )
    })
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
    let uid = my_euid();
    why_not_private(&meta, uid).map_err(|why| {
        let what_to_do = if meta.uid() == uid {
            "it is yours: remove it, or `chmod 700` it if it is a real directory".to_string()
        } else {
            format!(
                "it belongs to uid {} and only they or an administrator can remove it: ask an administrator \
                 to, or have this job meet elsewhere: set XDG_RUNTIME_DIR to a private directory of yours, \
                 TMPDIR to another temporary directory, or GPUSHMEM_BOOTSTRAP to a socket path in a private \
                 directory",
                meta.uid()
            )
        };
        refused(format!(
            "{why}; the bootstrap will not meet in a directory other users can enter or control ({what_to_do})"
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
        let nowhere = scratch("no-run-user");
        assert_eq!(default_dir_in(&|_: &str| None, &nowhere), PathBuf::from(format!("/tmp/gpushmem-{}", my_euid())));
    }

    #[test]
    fn run_user_dir_when_xdg_runtime_dir_is_unset() {
        // A logind-style /run/user/<uid>, private: preferred to the temporary directory.
        let base = scratch("run-user");
        let mine = base.join(my_euid().to_string());
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        let tmp_only = |k: &str| (k == "TMPDIR").then(|| "/var/tmp".to_string());
        assert_eq!(default_dir_in(&tmp_only, &base), mine.join("gpushmem"));
        // Not when XDG_RUNTIME_DIR says otherwise, nor when it is not private.
        let xdg_elsewhere = |k: &str| match k {
            "XDG_RUNTIME_DIR" => Some("/nonexistent-gpushmem-xdg".to_string()),
            _ => tmp_only(k),
        };
        let tmp = PathBuf::from(format!("/var/tmp/gpushmem-{}", my_euid()));
        assert_eq!(default_dir_in(&xdg_elsewhere, &base), tmp);
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(default_dir_in(&tmp_only, &base), tmp);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn squatted_dir_hint_says_what_to_do() {
        // Our own directory, left open: fix it ourselves.
        let d = scratch("hint-own");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ensure_private_dir(&d, 0).unwrap_err().to_string();
        assert!(e.contains("it is yours") && e.contains("chmod 700"), "{e}");
        std::fs::remove_dir(&d).unwrap();
        // (Another user's directory: bootstrap_security.rs::squatted_default_directory_says_what_to_do.)
    }

    #[test]
    fn shared_directories_are_warned_about() {
        let d = scratch("shared");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let w = shared_dir_warning(&d.join("job.sock")).expect("no warning for a mode 1777 directory");
        assert!(w.contains("1777") && w.contains(&d.display().to_string()), "{w}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(shared_dir_warning(&d.join("job.sock")), None);
        std::fs::remove_dir(&d).unwrap();
    }
}
