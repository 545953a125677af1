fn main() {
    std::process::exit(lab::cli::main());
}
