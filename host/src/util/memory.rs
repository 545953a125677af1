//! Memory lab holds but no longer uses, given back to the system.
//!
//! - [`give_back_freed_memory`]: the allocator's free memory (glibc keeps what a thread
//!   freed in that thread's own arena, as gaps a later allocation may reuse).
//! - [`drop_idle_code`]: lab's own machine code and read-only data, mapped from its
//!   executable. Starting runs through code that serving never runs again (loading
//!   the providers, reading the configuration, the registry's checks) and reads the
//!   bundled providers once: ~20 MiB of a 48 MiB executable stays resident after it.
//!   Dropping those pages loses nothing: they are clean copies of the file, still in
//!   the page cache, and a page used again is mapped back on its first use (a minor
//!   fault).

/// Hand the memory freed since back to the system. After a long history is listed
/// (its records read and bodies made on the runtime's threads) that is ~10 MiB at
/// 10,000 runs that lab no longer uses; glibc's `malloc_trim` returns every arena's
/// free pages.
pub fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Both of the above: what the start (or a minute of serving) used and let go.
pub fn give_back() {
    give_back_freed_memory();
    drop_idle_code();
}

/// Drop the resident pages of lab's own executable that hold only what its file holds:
/// its private, read-only mappings of its own file with no page written (no private
/// copy, `Anonymous: 0 kB` in `/proc/self/smaps`): its code and its read-only data
/// (the bundled providers among it), never a page relocations wrote. How many bytes of
/// mappings were dropped; 0 where this cannot be done.
pub fn drop_idle_code() -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else { return 0 };
        let exe = exe.to_string_lossy().trim_end_matches(" (deleted)").to_string();
        let mut dropped = 0;
        for (start, end) in unwritten_of(&smaps, &exe) {
            // SAFETY: the range is a whole private mapping of lab's executable that is
            // not writable and has no page of its own (nothing written to lose); its
            // pages come back from the file when next used.
            if unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) } == 0 {
                dropped += end - start;
            }
        }
        dropped
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// In a `/proc/<pid>/smaps` text: the mappings of `exe` that are private, readable and
/// not writable (`r-xp`, `r--p`) and hold no anonymous page.
fn unwritten_of(smaps: &str, exe: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // The mapping being read: its range, if it is one of exe's read-only private ones.
    let mut current: Option<(usize, usize)> = None;
    for l in smaps.lines() {
        if let Some(header) = mapping(l) {
            let (range, perms, path) = header;
            current = ((perms == "r-xp" || perms == "r--p") && path == exe).then_some(range);
            continue;
        }
        if let (Some(range), Some(v)) = (current, l.strip_prefix("Anonymous:")) {
            if v.trim() == "0 kB" {
                out.push(range);
            }
            current = None;
        }
    }
    out
}

/// A mapping's header line (`address perms offset dev inode path`): its range, its
/// permissions and its path (which may hold spaces); None for a field line.
fn mapping(l: &str) -> Option<((usize, usize), &str, &str)> {
    let mut rest = l;
    let mut field = || {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r;
        f
    };
    let (range, perms) = (field(), field());
    let (offset, dev, inode) = (field(), field(), field());
    let (a, b) = range.split_once('-')?;
    let range = (usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?);
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_hexdigit());
    let fields_ok = perms.len() == 4 && hex(offset) && dev.contains(':') && inode.bytes().all(|c| c.is_ascii_digit());
    fields_ok.then(|| (range, perms, rest.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_executables_unwritten_read_only_mappings_are_named() {
        let smaps = "\
55d08dbe3000-55d08e618000 r--p 00000000 fd:01 123 /opt/lab/bin/lab
Rss:                3700 kB
Anonymous:             0 kB
55d08e618000-55d08ff86000 r-xp 00a35000 fd:01 123 /opt/lab/bin/lab
Rss:               15264 kB
Anonymous:             0 kB
55d08ff86000-55d090076000 r--p 023a3000 fd:01 123 /opt/lab/bin/lab
Rss:                 960 kB
Anonymous:           960 kB
55d090076000-55d090080000 rw-p 02493000 fd:01 123 /opt/lab/bin/lab
Anonymous:             0 kB
7f651e969000-7f651ea03000 r-xp 00000000 00:00 0 
Anonymous:           616 kB
7f651f485000-7f651f5db000 r-xp 00028000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f6500000000-7f6500001000 r-xp 00000000 fd:01 124 /opt/lab/bin/lab two
Anonymous:             0 kB
";
        assert_eq!(
            unwritten_of(smaps, "/opt/lab/bin/lab"),
            [(0x55d08dbe3000, 0x55d08e618000), (0x55d08e618000, 0x55d08ff86000)],
            "code and read-only data; not the relocated part, not the writable one"
        );
        assert_eq!(unwritten_of(smaps, "/opt/lab/bin/lab two"), [(0x7f6500000000, 0x7f6500001000)]);
        assert_eq!(unwritten_of("Anonymous: 0 kB\nnot a header\n", "/opt/lab/bin/lab"), []);
    }

    #[test]
    fn dropping_the_code_leaves_it_running() {
        // This test binary's code and read-only data, dropped while it runs: what runs
        // next, and what it reads, come back from the file.
        assert!(drop_idle_code() > 0, "the executable's code is found and dropped");
        assert_eq!(unwritten_of("", "x"), []);
        assert_eq!(format!("{:?}", mapping("1-2 r-xp 0 00:01 5 /x y")), "Some(((1, 2), \"r-xp\", \"/x y\"))");
        give_back_freed_memory();
    }
}
