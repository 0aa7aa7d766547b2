//! Typed handles to registered nodes, and the input sets a node reads.
//!
//! A node is registered with a set of inputs: one handle or a tuple of handles. The node's
//! function receives the matching values: [`Node<T>`] gives `T`, [`All<T>`] gives every
//! instance of a family as `BTreeMap<ObjectKey, T>`, and [`Joined<P, T>`] (only for family
//! nodes) gives the one instance of another family that this instance's own object points at,
//! as `Option<T>`. Internally values travel as JSON; the types are checked when the graph is
//! built, because a handle can only be made by registering a node of that type.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::object::{Object, ObjectKey};

/// The index of a registered node in its graph.
pub(crate) type SlotId = usize;

/// The "primary" type of an input set read by a singleton node: there is no own object, so
/// [`Joined`] inputs (which need one) cannot be used.
#[derive(Debug)]
pub enum NoPrimary {}

/// A handle to a singleton node (or source) whose output is a `T`.
pub struct Node<T> {
    pub(crate) slot: SlotId,
    pub(crate) builder: u64,
    pub(crate) _t: PhantomData<fn() -> T>,
}

/// A handle to a node family: one instance per key, each with an output `T`.
///
/// A family from [`crate::GraphBuilder::objects`] has one instance per observed object of a
/// kind (its output is the [`crate::Object`]); a family from [`crate::GraphBuilder::family`]
/// has one instance per instance of its primary family.
pub struct Family<T> {
    pub(crate) slot: SlotId,
    pub(crate) builder: u64,
    pub(crate) _t: PhantomData<fn() -> T>,
}

/// An input reading every instance of a family, as `BTreeMap<ObjectKey, T>`. Made by
/// [`Family::all`]. A node reading it recomputes whenever any instance changes.
pub struct All<T> {
    pub(crate) slot: SlotId,
    pub(crate) builder: u64,
    pub(crate) _t: PhantomData<fn() -> T>,
}

/// An input reading how many instances a family has (those with an output), as `usize`. Made by
/// [`Family::count`]. It changes only when instances come or go, never when one changes, and
/// reading it costs O(1): what a guard like "is any user observed?" should depend on instead of
/// [`All`], which recomputes on every change and reads every instance.
pub struct Count<T> {
    pub(crate) slot: SlotId,
    pub(crate) builder: u64,
    pub(crate) _t: PhantomData<fn() -> T>,
}

/// An input of a family node reading the one instance of another family that its own
/// object (of type `P`) points at, as `Option<T>` (`None` when that instance does not exist).
/// Made by [`Family::joined`]. Only the instances pointing at a changed instance recompute.
pub struct Joined<P, T> {
    pub(crate) slot: SlotId,
    pub(crate) builder: u64,
    pub(crate) join: ErasedJoin,
    pub(crate) _t: PhantomData<fn(&P) -> T>,
}

/// A join function with its input type erased: primary value → target key.
pub(crate) type ErasedJoin =
    Arc<dyn Fn(PrimaryRef<'_>) -> Result<Option<ObjectKey>, serde_json::Error> + Send + Sync>;

/// The own object of a family instance as the engine holds it: an observed [`Object`] straight
/// from the World (no JSON round trip when the node reads it as an `Object`), or the JSON
/// output of an upstream family.
#[derive(Clone, Copy)]
pub(crate) enum PrimaryRef<'a> {
    Object(&'a Object),
    Json(&'a Value),
}

/// Moves `value` into a `T` when it is one (a type check, no copy); `None` otherwise.
pub(crate) fn cast<T: 'static, U: 'static>(value: U) -> Option<T> {
    let mut slot = Some(value);
    (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<T>>()
        .and_then(Option::take)
}

/// Calls `f` with the primary as a `&P`: borrowed when it is an observed object read as an
/// `Object`, decoded from JSON otherwise.
pub(crate) fn with_primary<P, R>(
    primary: PrimaryRef<'_>,
    f: impl FnOnce(&P) -> R,
) -> Result<R, serde_json::Error>
where
    P: DeserializeOwned + 'static,
{
    match primary {
        PrimaryRef::Object(o) => match (o as &dyn Any).downcast_ref::<P>() {
            Some(p) => Ok(f(p)),
            None => Ok(f(&P::deserialize(serde_json::to_value(o)?)?)),
        },
        PrimaryRef::Json(v) => Ok(f(&P::deserialize(v)?)),
    }
}

macro_rules! copy_handle {
    ($name:ident) => {
        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> std::fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("slot", &self.slot)
                    .finish()
            }
        }
    };
}
copy_handle!(Node);
copy_handle!(Family);
copy_handle!(All);
copy_handle!(Count);

impl<P, T> Clone for Joined<P, T> {
    fn clone(&self) -> Self {
        Self {
            slot: self.slot,
            builder: self.builder,
            join: Arc::clone(&self.join),
            _t: PhantomData,
        }
    }
}

impl<P, T> std::fmt::Debug for Joined<P, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joined").field("slot", &self.slot).finish()
    }
}

impl<T> Family<T> {
    /// An input reading every instance of this family.
    pub fn all(&self) -> All<T> {
        All {
            slot: self.slot,
            builder: self.builder,
            _t: PhantomData,
        }
    }

    /// An input reading how many instances this family has (see [`Count`]).
    pub fn count(&self) -> Count<T> {
        Count {
            slot: self.slot,
            builder: self.builder,
            _t: PhantomData,
        }
    }

    /// An input for a family node whose own object is a `P`: the instance of this family whose
    /// key `join` returns for that object (e.g. a machine's cluster).
    pub fn joined<P, F>(&self, join: F) -> Joined<P, T>
    where
        P: DeserializeOwned + 'static,
        F: Fn(&P) -> Option<ObjectKey> + Send + Sync + 'static,
    {
        let erased: ErasedJoin = Arc::new(move |p: PrimaryRef<'_>| with_primary(p, |p: &P| join(p)));
        Joined {
            slot: self.slot,
            builder: self.builder,
            join: erased,
            _t: PhantomData,
        }
    }
}

/// How one input reads its upstream node. Opaque; made by the handles.
#[doc(hidden)]
#[derive(Clone)]
pub struct InputSpec {
    pub(crate) slot: SlotId,
    pub(crate) builder: u64,
    pub(crate) kind: InputKind,
}

#[derive(Clone)]
pub(crate) enum InputKind {
    Single,
    All,
    Count,
    Joined(ErasedJoin),
}

/// Where a node's input values come from while it is computed. Opaque.
#[doc(hidden)]
pub struct Reader<'a> {
    pub(crate) source: &'a dyn ValueSource,
    pub(crate) specs: &'a [InputSpec],
    pub(crate) joins: &'a [Option<ObjectKey>],
}

/// Access to upstream values, implemented by the engine.
pub(crate) trait ValueSource {
    /// The output of a singleton slot, or of one instance of a family slot.
    fn value(
        &self,
        slot: SlotId,
        key: Option<&ObjectKey>,
    ) -> Result<Option<Cow<'_, Value>>, serde_json::Error>;
    /// Calls `each` with every instance of a family slot that has an output.
    fn for_each_instance(
        &self,
        slot: SlotId,
        each: &mut dyn FnMut(&ObjectKey, &Value) -> Result<(), serde_json::Error>,
    ) -> Result<(), serde_json::Error>;
    /// How many instances of a family slot have an output (objects of a kind for a kind slot).
    fn count(&self, slot: SlotId) -> usize;
    /// For a slot read straight from the World (one object, or every object of a kind): the
    /// observed object (`Some(None)` when absent); `None` for computed slots.
    fn object(&self, slot: SlotId, key: Option<&ObjectKey>) -> Option<Option<&Object>>;
    /// For a slot holding every observed object of a kind: calls `each` with each of them in
    /// key order and returns `true`; `false` (and no call) for other slots.
    fn for_each_object(&self, slot: SlotId, each: &mut dyn FnMut(&ObjectKey, &Object)) -> bool;
}

/// A reading failure: an upstream value did not decode as the input's type.
#[doc(hidden)]
#[derive(Debug)]
pub struct ReadError(pub(crate) serde_json::Error);

impl From<serde_json::Error> for ReadError {
    fn from(e: serde_json::Error) -> Self {
        ReadError(e)
    }
}

fn missing() -> ReadError {
    ReadError(serde::de::Error::custom("an upstream value is not available"))
}

impl Reader<'_> {
    fn slot(&self, i: usize) -> Result<&InputSpec, ReadError> {
        self.specs.get(i).ok_or_else(missing)
    }

    fn single<T: DeserializeOwned + 'static>(&self, i: usize) -> Result<T, ReadError> {
        let spec = self.slot(i)?;
        // An observed object read as `Option<Object>`: one clone, no JSON round trip.
        if let Some(o) = self.source.object(spec.slot, None)
            && let Some(t) = cast::<T, _>(o.cloned())
        {
            return Ok(t);
        }
        let v = self.source.value(spec.slot, None)?.ok_or_else(missing)?;
        Ok(T::deserialize(&*v)?)
    }

    fn all<T: DeserializeOwned + 'static>(&self, i: usize) -> Result<BTreeMap<ObjectKey, T>, ReadError> {
        let spec = self.slot(i)?;
        // Instances come in key order: collect, then bulk-build the map without searching.
        let mut out = Vec::new();
        if TypeId::of::<T>() == TypeId::of::<Object>() {
            let mut mismatch = false;
            let handled = self
                .source
                .for_each_object(spec.slot, &mut |k, o| match cast::<T, _>(o.clone()) {
                    Some(t) => out.push((k.clone(), t)),
                    None => mismatch = true,
                });
            if handled && !mismatch {
                return Ok(out.into_iter().collect());
            }
            out.clear();
        }
        self.source.for_each_instance(spec.slot, &mut |k, v| {
            out.push((k.clone(), T::deserialize(v)?));
            Ok(())
        })?;
        Ok(out.into_iter().collect())
    }

    fn count(&self, i: usize) -> Result<usize, ReadError> {
        Ok(self.source.count(self.slot(i)?.slot))
    }

    fn joined<T: DeserializeOwned + 'static>(&self, i: usize) -> Result<Option<T>, ReadError> {
        let spec = self.slot(i)?;
        let Some(Some(target)) = self.joins.get(i) else {
            return Ok(None);
        };
        if let Some(o) = self.source.object(spec.slot, Some(target))
            && let Some(t) = cast::<Option<T>, _>(o.cloned())
        {
            return Ok(t);
        }
        match self.source.value(spec.slot, Some(target))? {
            Some(v) => Ok(Some(T::deserialize(&*v)?)),
            None => Ok(None),
        }
    }
}

/// One input of a node whose own object has type `P` ([`NoPrimary`] for singleton nodes).
pub trait Input<P> {
    /// The value the node's function receives for this input.
    type Value;
    #[doc(hidden)]
    fn spec(&self) -> InputSpec;
    #[doc(hidden)]
    fn read(reader: &Reader<'_>, index: usize) -> Result<Self::Value, ReadError>;
}

impl<P, T: DeserializeOwned + 'static> Input<P> for Node<T> {
    type Value = T;
    fn spec(&self) -> InputSpec {
        InputSpec {
            slot: self.slot,
            builder: self.builder,
            kind: InputKind::Single,
        }
    }
    fn read(reader: &Reader<'_>, index: usize) -> Result<T, ReadError> {
        reader.single(index)
    }
}

impl<P, T: DeserializeOwned + 'static> Input<P> for All<T> {
    type Value = BTreeMap<ObjectKey, T>;
    fn spec(&self) -> InputSpec {
        InputSpec {
            slot: self.slot,
            builder: self.builder,
            kind: InputKind::All,
        }
    }
    fn read(reader: &Reader<'_>, index: usize) -> Result<Self::Value, ReadError> {
        reader.all(index)
    }
}

impl<P, T> Input<P> for Count<T> {
    type Value = usize;
    fn spec(&self) -> InputSpec {
        InputSpec {
            slot: self.slot,
            builder: self.builder,
            kind: InputKind::Count,
        }
    }
    fn read(reader: &Reader<'_>, index: usize) -> Result<usize, ReadError> {
        reader.count(index)
    }
}

impl<P, T: DeserializeOwned + 'static> Input<P> for Joined<P, T> {
    type Value = Option<T>;
    fn spec(&self) -> InputSpec {
        InputSpec {
            slot: self.slot,
            builder: self.builder,
            kind: InputKind::Joined(Arc::clone(&self.join)),
        }
    }
    fn read(reader: &Reader<'_>, index: usize) -> Result<Option<T>, ReadError> {
        reader.joined(index)
    }
}

/// The set of inputs of a node: `()`, one [`Input`], or a tuple of up to eight.
pub trait Inputs<P> {
    /// The values the node's function receives (`()`, the value, or a tuple of values).
    type Values;
    #[doc(hidden)]
    fn specs(&self) -> Vec<InputSpec>;
    #[doc(hidden)]
    fn read(reader: &Reader<'_>) -> Result<Self::Values, ReadError>;
}

impl<P> Inputs<P> for () {
    type Values = ();
    fn specs(&self) -> Vec<InputSpec> {
        Vec::new()
    }
    fn read(_: &Reader<'_>) -> Result<(), ReadError> {
        Ok(())
    }
}

macro_rules! single_inputs {
    ($($ty:ident),*) => {$(
        impl<P, T: DeserializeOwned + 'static> Inputs<P> for $ty<T> {
            type Values = <Self as Input<P>>::Value;
            fn specs(&self) -> Vec<InputSpec> {
                vec![<Self as Input<P>>::spec(self)]
            }
            fn read(reader: &Reader<'_>) -> Result<Self::Values, ReadError> {
                <Self as Input<P>>::read(reader, 0)
            }
        }
    )*};
}
single_inputs!(Node, All);

impl<P, T> Inputs<P> for Count<T> {
    type Values = usize;
    fn specs(&self) -> Vec<InputSpec> {
        vec![<Self as Input<P>>::spec(self)]
    }
    fn read(reader: &Reader<'_>) -> Result<Self::Values, ReadError> {
        <Self as Input<P>>::read(reader, 0)
    }
}

impl<P, T: DeserializeOwned + 'static> Inputs<P> for Joined<P, T> {
    type Values = Option<T>;
    fn specs(&self) -> Vec<InputSpec> {
        vec![<Self as Input<P>>::spec(self)]
    }
    fn read(reader: &Reader<'_>) -> Result<Self::Values, ReadError> {
        <Self as Input<P>>::read(reader, 0)
    }
}

macro_rules! tuple_inputs {
    ($(($($t:ident $i:tt),+))*) => {$(
        impl<P, $($t: Input<P>),+> Inputs<P> for ($($t,)+) {
            type Values = ($($t::Value,)+);
            fn specs(&self) -> Vec<InputSpec> {
                vec![$(self.$i.spec()),+]
            }
            fn read(reader: &Reader<'_>) -> Result<Self::Values, ReadError> {
                Ok(($($t::read(reader, $i)?,)+))
            }
        }
    )*};
}
tuple_inputs! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
}
