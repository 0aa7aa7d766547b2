//! [`GoneFamilies`]: the refresh families this replica saw gone from the store, so that a token
//! of one — which keeps its MAC until the family's end — is answered without reading the store
//! again.

use super::{BUCKET_CAPACITY, recency::RecencyMap};

/// Refresh families this replica found revoked or ended in the store (bounded, least recently
/// seen forgotten first).
///
/// A family id is 128 random bits, made at a sign-in and never made again, so a family that is
/// gone from its user's entry never comes back: remembering it is always right, and forgetting it
/// only costs one more store read. Without it a token of a family signed out long ago is checked
/// against the store at each presentation (on Kubernetes a GET of the whole credentials Secret),
/// and its holder could have that done as fast as the family's bucket allows for each of the
/// families it ever signed in.
#[derive(Debug)]
pub struct GoneFamilies {
    capacity: usize,
    families: RecencyMap<String, ()>,
}

impl Default for GoneFamilies {
    fn default() -> Self {
        Self::with_capacity(BUCKET_CAPACITY)
    }
}

impl GoneFamilies {
    /// An empty table of at most [`BUCKET_CAPACITY`] families.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table of at most `capacity` families.
    pub fn with_capacity(capacity: usize) -> Self {
        GoneFamilies {
            capacity: capacity.max(1),
            families: RecencyMap::new(),
        }
    }

    /// Remembers that `fam` is gone from the store.
    pub fn insert(&mut self, fam: &str) {
        let fam = fam.to_owned();
        if !self.families.touch(&fam) {
            while self.families.len() >= self.capacity && self.families.pop_oldest().is_some() {}
            self.families.insert(fam, ());
        }
    }

    /// Whether `fam` is known to be gone (a presentation keeps it remembered).
    pub fn contains(&mut self, fam: &str) -> bool {
        self.families.touch(&fam.to_owned())
    }

    /// The number of families remembered.
    pub fn len(&self) -> usize {
        self.families.len()
    }

    /// Whether no family is remembered.
    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }
}
