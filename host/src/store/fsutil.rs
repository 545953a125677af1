//! Small file-system helpers shared by the hook command, the spool, the runtime dir and
//! lab's home. Modes are set explicitly (open with the mode, then fix an existing
//! file or directory), never by changing the process umask: the agents lab launches
//! keep the operator's umask for what they write in the workdir.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Write `data` to `path` atomically: a temp file in the same directory, flushed and
/// synced, then renamed over `path`. A reader sees the old file or the new one, never
/// a partial one. The file gets exactly `mode`, whatever the umask.
///
/// The temp file is `.<file name>.tmp.<pid>.<nanos>`; one left by a process killed
/// mid-write is removed by whoever owns the directory (see [`is_temp_name`]).
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    replace(path, data, mode, true)
}

/// [`write_atomic`] without the sync: for a copy whose original is elsewhere (a hook
/// file a runner sent up, which it sends again after a restart), where a crash may
/// lose the copy but a reader must still never see half of it.
pub fn write_atomic_unsynced(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    replace(path, data, mode, false)
}

fn replace(path: &Path, data: &[u8], mode: u32, sync: bool) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("path has no parent directory"))?;
    let name = path.file_name().ok_or_else(|| std::io::Error::other("path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0)
    ));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        if sync {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A private JSON list kept whole in `path`: missing is empty; unreadable is an error
/// naming the file and `what` it should be, with `hint` (nothing is overwritten).
pub fn load_json_list<T: serde::de::DeserializeOwned>(path: &Path, what: &str, hint: &str) -> anyhow::Result<Vec<T>> {
    match read_optional(path)? {
        None => Ok(Vec::new()),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: not lab's list of {what} ({e}){hint}", path.display())),
    }
}

/// Write `list` as JSON to `path`, whole and atomically, 0600.
pub fn save_json_list<T: serde::Serialize>(path: &Path, list: &[T]) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(list).map_err(std::io::Error::other)?;
    write_atomic(path, &json, 0o600)
}

/// Whether `file_name` is an in-flight temp file of [`write_atomic`].
pub fn is_temp_name(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.contains(".tmp.")
}

/// Create `dir` (and missing parents, also 0700) and make sure it is mode 0700, also
/// when it already existed with a wider mode.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    set_mode(dir, 0o700)
}

/// Open `path` for appending (created if missing, never through a symlink) with mode
/// 0600, and fix the mode of an existing file. For logs and other private files.
pub fn private_file(path: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    if MetadataExt::mode(&f.metadata()?) & 0o7777 != 0o600 {
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(f)
}

/// Set `path`'s permission bits to `mode` if they differ (a missing file is fine).
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    match fs::metadata(path) {
        Ok(m) if MetadataExt::mode(&m) & 0o7777 == mode => Ok(()),
        Ok(_) => fs::set_permissions(path, fs::Permissions::from_mode(mode)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// What [`untrusted`] looks at: the facts of `lstat`/`fstat`, so tests can make them up.
pub trait OwnerFacts {
    fn uid(&self) -> u32;
    /// `st_mode`: file type and permission bits.
    fn mode(&self) -> u32;
}

/// Facts given as they are (a uid and an `st_mode`): what a rule is asked about when
/// it is not a file's own `stat` (tests, an owner taken as another).
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub uid: u32,
    pub mode: u32,
}

impl OwnerFacts for Stat {
    fn uid(&self) -> u32 {
        self.uid
    }
    fn mode(&self) -> u32 {
        self.mode
    }
}

impl OwnerFacts for fs::Metadata {
    fn uid(&self) -> u32 {
        MetadataExt::uid(self)
    }
    fn mode(&self) -> u32 {
        MetadataExt::mode(self)
    }
}

/// The kind of file a trusted path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// Why a file or directory cannot be trusted to hold what only lab (this user) wrote:
/// not the expected kind (a symlink, a fifo, …), owned by another user, or writable by
/// group or others. `None` when it can be trusted.
pub fn untrusted(facts: &impl OwnerFacts, kind: Kind, euid: u32) -> Option<String> {
    let fmt = facts.mode() & libc::S_IFMT;
    let want = match kind {
        Kind::File => libc::S_IFREG,
        Kind::Dir => libc::S_IFDIR,
    };
    if fmt != want {
        let is = match fmt {
            libc::S_IFLNK => "a symlink",
            libc::S_IFDIR => "a directory",
            libc::S_IFREG => "a regular file",
            _ => "a special file",
        };
        return Some(format!("it is {is}"));
    }
    if facts.uid() != euid {
        return Some(format!("it is owned by uid {}, not by lab's uid {euid}", facts.uid()));
    }
    if facts.mode() & 0o022 != 0 {
        return Some(format!("it is writable by group or others (mode {:04o})", facts.mode() & 0o7777));
    }
    None
}

/// The effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Remove a file; a missing file is fine.
pub fn remove_if_exists(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Read a file; `None` if it does not exist.
pub fn read_optional(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Open a file the agent's side names or writes, for reading: never through a symlink
/// (`O_NOFOLLOW`), never blocking on a FIFO or a device (`O_NONBLOCK`), and only if
/// `fstat` on what was opened (not the path: no race) says it is a regular file that
/// is not the kernel's ([`checked`]). `None` if it does not exist.
pub fn open_untrusted(path: &Path) -> std::io::Result<Option<File>> {
    match OpenOptions::new().read(true).custom_flags(UNTRUSTED_FLAGS).open(path) {
        Ok(f) => checked(f).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(refusal(e)),
    }
}

const UNTRUSTED_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

fn refusal(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::other("it is a symlink (never followed)")
    } else {
        e
    }
}

/// An opened file, if it is one of the agent's: a regular file, not on procfs or sysfs
/// (`/proc/self/environ` is a "regular file" of size 0 that holds lab's secrets).
fn checked(f: File) -> std::io::Result<File> {
    if on_kernel_fs(&f) {
        return Err(std::io::Error::other("it is a file of the kernel's (/proc, /sys), not the agent's"));
    }
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other(match MetadataExt::mode(&meta) & libc::S_IFMT {
            libc::S_IFDIR => "it is a directory, not a regular file",
            libc::S_IFIFO => "it is a FIFO, not a regular file",
            _ => "it is a device or special file, not a regular file",
        }));
    }
    Ok(f)
}

/// Open `path`, which must lie inside the directory `root`, walking down from `root` one
/// component at a time (`openat`) without following a symlink anywhere below `root`
/// and without `..`: what it opens is inside `root` whatever is renamed meanwhile. The
/// file itself as [`open_untrusted`] opens it. `None` if it does not exist.
pub fn open_beneath(root: &Path, path: &Path) -> std::io::Result<Option<File>> {
    let names = names_beneath(root, path)?;
    let Some((file, dirs)) = names.split_last() else { return Err(std::io::Error::other("it names no file")) };
    let Some(dir) = descend(root, dirs, false)? else { return Ok(None) };
    match open_at(&dir, file, libc::O_RDONLY | UNTRUSTED_FLAGS, 0) {
        Ok(f) => checked(f).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Write `data` (at most `cap` bytes) as the file `path`, which must lie inside the
/// directory `root`: walked down as [`open_beneath`] does (no symlink below `root`, no
/// `..`), missing folders made on the way (mode 0777 less the umask, as `mkdir` does); a
/// new file created exclusively (`O_EXCL`: a dangling symlink is not followed out), an
/// existing one opened without following a symlink or blocking, checked to be a regular
/// file of the agent's ([`checked`]) and only then truncated and written.
pub fn write_beneath(root: &Path, path: &Path, data: &[u8], cap: usize) -> std::io::Result<()> {
    if data.len() > cap {
        return Err(std::io::Error::other(format!("{} bytes is over the {cap} byte limit", data.len())));
    }
    let names = names_beneath(root, path)?;
    let Some((file, dirs)) = names.split_last() else { return Err(std::io::Error::other("it names no file")) };
    let dir = descend(root, dirs, true)?.ok_or_else(|| std::io::Error::other("a folder on the way is gone"))?;
    let write = libc::O_WRONLY | UNTRUSTED_FLAGS;
    let mut f = match open_at(&dir, file, write | libc::O_CREAT | libc::O_EXCL, 0o666) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let f = checked(open_at(&dir, file, write, 0)?)?;
            f.set_len(0)?;
            f
        }
        Err(e) => return Err(e),
    };
    f.write_all(data)
}

/// `path`'s names below `root`: plain names only (no `.`, `..` or root).
fn names_beneath<'a>(root: &Path, path: &'a Path) -> std::io::Result<Vec<&'a std::ffi::OsStr>> {
    use std::path::Component;
    let rel =
        path.strip_prefix(root).map_err(|_| std::io::Error::other(format!("it is not inside {}", root.display())))?;
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(std::io::Error::other("it has `.` or `..` in it")),
        })
        .collect()
}

/// `openat(dir, name, flags, mode)`.
fn open_at(dir: &File, name: &std::ffi::OsStr, flags: i32, mode: libc::c_uint) -> std::io::Result<File> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(name.as_bytes()).map_err(|_| std::io::Error::other("a NUL in the path"))?;
    // SAFETY: a valid descriptor and C string; the result is checked before use.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(refusal(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The folder `dirs` below `root`, each step opened without following a symlink
/// (`None`: one is missing; `make`: missing ones are made instead).
fn descend(root: &Path, dirs: &[&std::ffi::OsStr], make: bool) -> std::io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    let mut dir = File::open(root)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    for d in dirs {
        let mut opened = open_at(&dir, d, flags, 0);
        if make && opened.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            use std::os::unix::ffi::OsStrExt;
            let c = std::ffi::CString::new(d.as_bytes()).map_err(|_| std::io::Error::other("a NUL in the path"))?;
            // SAFETY: a valid descriptor and C string. A folder made meanwhile is fine.
            if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
            opened = open_at(&dir, d, flags, 0);
        }
        dir = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) || e.to_string().contains("symlink") => {
                return Err(std::io::Error::other(format!(
                    "{} is a symlink or no directory (never followed)",
                    d.to_string_lossy()
                )))
            }
            Err(e) => return Err(e),
        };
    }
    Ok(Some(dir))
}

/// Whether an open file lives on procfs or sysfs (`fstatfs`), whose "regular files"
/// are views of the kernel's and of lab's own state.
fn on_kernel_fs(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    // SAFETY: `f` is an open descriptor and `st` a valid out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return true; // cannot tell: refuse
    }
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between targets
    let t = st.f_type as i64;
    t == PROC_SUPER_MAGIC || t == SYSFS_MAGIC
}

/// Read at most `cap` bytes of an opened file: a larger one is refused without reading
/// more than `cap + 1` bytes (the size `fstat` gave may change while it is read).
pub fn read_capped(f: File, cap: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    if f.metadata()?.len() > cap as u64 {
        return Err(std::io::Error::other(format!("it is over the {cap} byte limit")));
    }
    let mut buf = Vec::new();
    f.take(cap as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > cap {
        return Err(std::io::Error::other(format!("it grew over the {cap} byte limit while read")));
    }
    Ok(buf)
}

/// Read a file the agent's side names or writes ([`open_untrusted`]), at most `cap`
/// bytes ([`read_capped`]). `None` if it does not exist.
pub fn read_untrusted(path: &Path, cap: usize) -> std::io::Result<Option<Vec<u8>>> {
    open_untrusted(path)?.map(|f| read_capped(f, cap)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_reads_refuse_symlinks_fifos_devices_folders_and_oversize() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("ok.json");
        fs::write(&ok, b"{}").unwrap();
        assert_eq!(read_untrusted(&ok, 2).unwrap().unwrap(), b"{}");
        assert!(read_untrusted(&d.path().join("missing"), 2).unwrap().is_none());
        let err = |p: &Path, cap| read_untrusted(p, cap).unwrap_err().to_string();
        assert!(err(&ok, 1).contains("limit"));
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert!(err(&link, 100).contains("symlink"));
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo has no other precondition.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(err(&fifo, 100).contains("FIFO"), "a FIFO nobody writes to is refused at once");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(err(Path::new("/dev/zero"), 100).contains("device"));
        assert!(err(d.path(), 100).contains("directory"));
        // Beneath a root: no symlink anywhere below it, no `..`, nothing outside.
        std::fs::create_dir_all(d.path().join("plans/deep")).unwrap();
        fs::write(d.path().join("plans/deep/p.md"), b"plan").unwrap();
        let beneath = |p: &str| open_beneath(d.path(), &d.path().join(p));
        assert!(beneath("plans/deep/p.md").unwrap().is_some());
        assert!(beneath("plans/deep/none.md").unwrap().is_none());
        assert!(beneath("nowhere/p.md").unwrap().is_none());
        std::os::unix::fs::symlink(d.path().join("plans/deep"), d.path().join("plans/via")).unwrap();
        assert!(beneath("plans/via/p.md").unwrap_err().to_string().contains("symlink"));
        assert!(beneath("plans/../plans/deep/p.md").unwrap_err().to_string().contains(".."));
        assert!(open_beneath(d.path(), Path::new("/etc/passwd")).unwrap_err().to_string().contains("not inside"));
        assert!(beneath("fifo").unwrap_err().to_string().contains("FIFO"));
        // /proc files claim to be regular files of size 0 (environ holds lab's secrets,
        // pagemap reads without end): never the agent's.
        for p in ["/proc/self/environ", "/proc/self/pagemap", "/sys/kernel/mm/transparent_hugepage/enabled"] {
            if Path::new(p).exists() {
                assert!(err(Path::new(p), 1 << 20).contains("kernel"), "{p}");
            }
        }
    }

    fn mode_of(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// Run `f` with the process umask set to `mask` (tests only: lab itself never
    /// changes its umask).
    fn with_umask<T>(mask: libc::mode_t, f: impl FnOnce() -> T) -> T {
        // SAFETY: umask cannot fail; other tests in this binary do not depend on it
        // for modes because every helper here sets modes explicitly.
        let old = unsafe { libc::umask(mask) };
        let out = f();
        unsafe { libc::umask(old) };
        out
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("spool.json");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(mode_of(&p), 0o600);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn temp_names_are_recognised() {
        assert!(is_temp_name(".r-1.spool.json.tmp.42.7"));
        assert!(!is_temp_name("r-1.spool.json"));
        assert!(!is_temp_name(".hidden"));
    }

    #[test]
    fn private_dirs_and_files_get_their_modes_whatever_the_umask() {
        let d = tempfile::tempdir().unwrap();
        let (dir, file, deep) = (d.path().join("home"), d.path().join("home/x.log"), d.path().join("a/b/c"));
        with_umask(0o000, || {
            private_dir(&dir).unwrap();
            private_dir(&deep).unwrap();
            private_file(&file).unwrap().write_all(b"line\n").unwrap();
            write_atomic(&dir.join("y"), b"y", 0o600).unwrap();
        });
        assert_eq!(mode_of(&dir), 0o700);
        assert_eq!(mode_of(&d.path().join("a")), 0o700);
        assert_eq!(mode_of(&deep), 0o700);
        assert_eq!(mode_of(&file), 0o600);
        assert_eq!(mode_of(&dir.join("y")), 0o600);

        // Existing, too open: fixed; contents kept (append).
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o775)).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o664)).unwrap();
        private_dir(&dir).unwrap();
        private_file(&file).unwrap().write_all(b"more\n").unwrap();
        assert_eq!(mode_of(&dir), 0o700);
        assert_eq!(mode_of(&file), 0o600);
        assert_eq!(fs::read(&file).unwrap(), b"line\nmore\n");
        set_mode(&d.path().join("missing"), 0o600).unwrap();
    }

    #[test]
    fn private_files_are_not_opened_through_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        fs::write(&target, b"keep").unwrap();
        let link = d.path().join("lab.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(private_file(&link).is_err());
        assert_eq!(fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn only_own_private_regular_files_are_trusted() {
        let f = |uid, mode| Stat { uid, mode };
        let file = libc::S_IFREG;
        let dir = libc::S_IFDIR;
        assert_eq!(untrusted(&f(1000, file | 0o600), Kind::File, 1000), None);
        assert_eq!(untrusted(&f(1000, file | 0o644), Kind::File, 1000), None);
        assert_eq!(untrusted(&f(1000, dir | 0o700), Kind::Dir, 1000), None);
        let why = |uid, mode, kind| untrusted(&f(uid, mode), kind, 1000).unwrap();
        assert!(why(1001, file | 0o600, Kind::File).contains("owned by uid 1001"));
        assert!(why(0, dir | 0o700, Kind::Dir).contains("owned by uid 0"));
        assert!(why(1000, file | 0o620, Kind::File).contains("writable by group"));
        assert!(why(1000, file | 0o602, Kind::File).contains("0602"));
        assert!(why(1000, dir | 0o770, Kind::Dir).contains("writable"));
        assert!(why(1000, libc::S_IFLNK | 0o777, Kind::File).contains("symlink"));
        assert!(why(1000, dir | 0o700, Kind::File).contains("directory"));
        assert!(why(1000, libc::S_IFIFO | 0o600, Kind::File).contains("special"));
        assert!(why(1000, file | 0o600, Kind::Dir).contains("regular file"));
    }

    #[test]
    fn real_metadata_feeds_the_check() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("entry");
        write_atomic(&p, b"x", 0o600).unwrap();
        assert_eq!(untrusted(&fs::symlink_metadata(&p).unwrap(), Kind::File, euid()), None);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o620)).unwrap();
        assert!(untrusted(&fs::symlink_metadata(&p).unwrap(), Kind::File, euid()).is_some());
        assert!(untrusted(&fs::symlink_metadata(&p).unwrap(), Kind::File, euid().wrapping_add(1)).is_some());
    }
}
