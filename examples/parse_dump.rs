fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let src = tempest::syntax::diagnostics::SourceFile::new(path, text.clone());
    let reg = tempest::model::custom::Registry::default();
    let r = tempest::syntax::parse(&text)
        .and_then(|p| tempest::semantic::check(&p, &reg))
        .and_then(tempest::ir::lower::lower);
    match r {
        Ok(g) => print!("{}", tempest::ir::print::graph(&g)),
        Err(e) => print!(
            "{}",
            tempest::syntax::diagnostics::render(&e, Some(&src), false)
        ),
    }
}
