fn main() {
    let args: Vec<String> = std::env::args().collect();
    // The hook path stays tiny: no argument parser, no runtime, no components.
    match args.get(1).map(String::as_str) {
        Some("hook") => std::process::exit(lab::hook::main(&args[2..])),
        Some("agent-exec") => std::process::exit(lab::agent_exec::main(&args[2..])),
        _ => {}
    }
    std::process::exit(lab::cli::main());
}
