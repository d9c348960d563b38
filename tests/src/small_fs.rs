//! A small ext4 file system on a loop device, for full-disk tests (root
//! only), and a ballast file that fills it.

use std::path::PathBuf;
use std::process::Command;

/// A mounted ext4 image; unmounted and removed on drop.
pub struct SmallFs {
    image: PathBuf,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    _root: tempfile::TempDir,
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl SmallFs {
    /// Makes and mounts an ext4 file system of `size_mib` MiB, or says why
    /// it cannot here (not root, no loop devices, no mkfs.ext4).
    pub fn mount(size_mib: u64) -> Result<SmallFs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(String::from("loop mounts need root"));
        }
        let root = crate::data_dir();
        let image = root.path().join("fs.img");
        let mount_point = root.path().join("mnt");
        std::fs::create_dir_all(&mount_point).map_err(|e| e.to_string())?;
        let file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        file.set_len(size_mib << 20).map_err(|e| e.to_string())?;
        drop(file);
        let image_text = image.to_string_lossy().to_string();
        let mount_text = mount_point.to_string_lossy().to_string();
        run("mkfs.ext4", &["-q", "-F", &image_text])?;
        run("mount", &["-o", "loop", &image_text, &mount_text])?;
        Ok(SmallFs {
            image,
            mount_point,
            _root: root,
        })
    }

    /// Bytes available on it now.
    pub fn free_bytes(&self) -> u64 {
        let Ok(c_path) = std::ffi::CString::new(self.mount_point.as_os_str().as_encoded_bytes())
        else {
            return 0;
        };
        // SAFETY: all-zero bytes are a valid `statvfs`.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: c_path is NUL-terminated and stat a valid out pointer.
        if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
            return 0;
        }
        stat.f_bavail * stat.f_frsize
    }

    /// Fills it with a ballast file (really allocated, not sparse) until
    /// about `leave_bytes` are free; the ballast's path.
    pub fn fill_leaving(&self, leave_bytes: u64) -> PathBuf {
        let ballast = self.mount_point.join("ballast");
        let size = self.free_bytes().saturating_sub(leave_bytes);
        let file = std::fs::File::create(&ballast).expect("ballast file");
        if size > 0 {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open file descriptor and a non-negative range.
            let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size as libc::off_t) };
            assert_eq!(rc, 0, "posix_fallocate of the ballast");
        }
        file.sync_all().expect("ballast synced");
        ballast
    }

    /// A directory on it.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.mount_point.join(name);
        std::fs::create_dir_all(&dir).expect("dir on the small fs");
        dir
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let mount_text = self.mount_point.to_string_lossy().to_string();
        // Lazy: a broker killed a moment ago may still hold files open.
        let _ = run("umount", &["-l", &mount_text]);
        let _ = std::fs::remove_file(&self.image);
    }
}
