fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let src = tempest::syntax::diagnostics::SourceFile::new(path, text.clone());
    match tempest::syntax::parse(&text) {
        Ok(p) => print!("{}", tempest::syntax::print::program(&p, &src)),
        Err(e) => print!(
            "{}",
            tempest::syntax::diagnostics::render(&e, Some(&src), false)
        ),
    }
}
