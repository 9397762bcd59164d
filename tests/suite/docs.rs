//! The language reference stays true to the code: every engine's settings
//! table in `docs/language.md` lists exactly the settings of its schema,
//! with their types, defaults and meanings.

use tempest::infer::registry::ENGINES;

#[test]
fn the_settings_tables_match_the_engines_schemas() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md");
    let doc = std::fs::read_to_string(path).expect("docs/language.md");
    let rows: Vec<&str> = doc.lines().collect();
    for def in ENGINES {
        let schema = def.schema();
        // The table under the engine's heading (the samplers share one).
        let heading = rows
            .iter()
            .position(|l| {
                l.starts_with("#### ")
                    && l.contains(&format!("`{}`", schema.name))
                    && l.contains(" — ")
            })
            .unwrap_or_else(|| panic!("no heading for `{}` in docs/language.md", schema.name));
        let table: Vec<&str> = rows[heading + 1..]
            .iter()
            .skip_while(|l| !l.starts_with("| setting |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .copied()
            .collect();
        let want: Vec<String> = schema
            .settings
            .iter()
            .map(|s| s.markdown_row(&tempest::infer::registry::schemas()))
            .collect();
        assert_eq!(
            table, want,
            "the settings table of `{}` in docs/language.md differs from its schema",
            schema.name
        );
    }
}
