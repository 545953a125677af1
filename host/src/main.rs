fn main() {
    one_malloc_arena();
    std::process::exit(lab::cli::main());
}

/// glibc gives each thread that allocates its own arena (up to 8 per core) and keeps
/// what is freed in it: a page of work done on a runtime thread (listing a long
/// history, reading a chat) then stays in lab's memory as a gap in that thread's arena.
/// lab's threads mostly wait on I/O, and small allocations come from each thread's own
/// cache without the arena's lock, so one arena costs little and keeps lab serve's
/// memory to what it holds (docs/perf.md: 10,000 ended runs listed, 40 → 28 MiB).
/// Set before any thread starts.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter; no other thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
