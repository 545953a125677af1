//! What a model's tokens cost: the price table shipped with lab (`prices.toml`, dated)
//! with lab.toml's `[prices."<model>"]` over it. A model without a price has no cost:
//! lab never guesses one from a similar name.

use crate::agents::model::Tokens;
use serde::Deserialize;
use std::collections::BTreeMap;

const SHIPPED: &str = include_str!("prices.toml");

pub use crate::store::config::Price;

/// What `t` costs at `p`, in US dollars.
pub fn cost(p: &Price, t: &Tokens) -> f64 {
    (t.input as f64 * p.input
        + t.output as f64 * p.output
        + t.cache_read as f64 * p.cache_read
        + t.cache_write as f64 * p.cache_write)
        / 1_000_000.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    as_of: String,
    models: BTreeMap<String, Price>,
}

/// The prices lab serves with.
#[derive(Debug, Clone)]
pub struct Prices {
    /// The date of the shipped table.
    pub as_of: String,
    models: BTreeMap<String, Price>,
}

impl Prices {
    /// The shipped table with `overrides` (lab.toml) over it.
    pub fn new(overrides: &BTreeMap<String, Price>) -> Prices {
        let t: Table = toml::from_str(SHIPPED).expect("the shipped price table parses (a test holds it)");
        let mut models = t.models;
        models.extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        Prices { as_of: t.as_of, models }
    }

    /// The price of `model`: its own entry, or the entry it is with a trailing release
    /// date (`-20250929`, `@20250929`) taken off.
    pub fn of(&self, model: &str) -> Option<&Price> {
        self.models.get(model).or_else(|| self.models.get(undated(model)?))
    }

    /// What `by_model` costs; None when any model in it that used tokens has no price.
    pub fn cost<'a>(&self, by_model: impl IntoIterator<Item = (&'a String, &'a Tokens)>) -> Option<f64> {
        let mut sum = 0.0;
        for (model, t) in by_model {
            if t.is_zero() {
                continue;
            }
            sum += cost(self.of(model)?, t);
        }
        Some(sum)
    }
}

/// `claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`; None when no date ends it.
fn undated(model: &str) -> Option<&str> {
    let (head, date) = model.rsplit_once(['-', '@'])?;
    (date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit())).then_some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Tokens {
        Tokens { input, output, cache_read, cache_write }
    }

    #[test]
    fn the_shipped_table_parses_and_prices_a_dated_model_as_its_entry() {
        let p = Prices::new(&BTreeMap::new());
        assert!(!p.as_of.is_empty());
        assert!(p.models.len() >= 10);
        for (name, price) in &p.models {
            assert!(price.input > 0.0 && price.output >= price.input && price.cache_read < price.input, "{name}");
            assert_eq!(p.of(&format!("{name}-20250929")), Some(price), "a release date after {name}");
            assert_eq!(p.of(&format!("{name}@20250929")), Some(price), "a release date after {name}");
        }
        let (name, price) = p.models.iter().next().unwrap();
        let million = cost(price, &t(1_000_000, 1_000_000, 1_000_000, 1_000_000));
        assert!((million - (price.input + price.output + price.cache_read + price.cache_write)).abs() < 1e-9, "{name}");
    }

    #[test]
    fn an_unknown_model_has_no_price_and_a_sum_with_it_no_cost() {
        let p = Prices::new(&BTreeMap::new());
        let (known, _) = p.models.iter().next().unwrap();
        assert!(p.of(&format!("{known}-9")).is_none(), "no guess from a near name");
        assert!(p.of(&format!("{known}-2025")).is_none(), "not a release date");
        assert!(p.of("stand-in-model").is_none());
        let by: BTreeMap<String, Tokens> =
            [(known.clone(), t(10, 0, 0, 0)), ("stand-in-model".to_string(), t(1, 0, 0, 0))].into();
        assert_eq!(p.cost(&by), None);
        // A model that used nothing costs nothing, priced or not.
        let by: BTreeMap<String, Tokens> = [("stand-in-model".to_string(), t(0, 0, 0, 0))].into();
        assert_eq!(p.cost(&by), Some(0.0));
    }

    #[test]
    fn lab_toml_adds_and_replaces_models() {
        let shipped = Prices::new(&BTreeMap::new());
        let (known, _) = shipped.models.iter().next().unwrap();
        let mine = Price { input: 1.0, output: 2.0, cache_read: 0.0, cache_write: 0.0 };
        let p = Prices::new(&[("stand-in-model".to_string(), mine), (known.clone(), mine)].into());
        assert_eq!(p.of("stand-in-model"), Some(&mine));
        assert_eq!(p.of(known), Some(&mine));
        assert_eq!(p.cost(&BTreeMap::from([("stand-in-model".to_string(), t(1_000_000, 500_000, 0, 0))])), Some(2.0));
    }
}
