//! The dashboard's views, one file each: its state, the keys it takes and
//! how it is drawn (the [`View`] trait; the drawing itself is in
//! `src/tui/draw/`). A view is registered by one line in `views!` below,
//! `Tab => file::Type`, which declares its file's module, gives it its
//! [`Tab`] (the tabs' order is the lines' order) and its field in [`Views`]
//! (named as its file); the compiler then asks for the file, the type and
//! its `View` methods. The panel over a view is no tab: its state and keys
//! are [`overlay::Panel`].

pub mod overlay;
pub mod view;

pub use view::{Action, Change, View};

use std::any::TypeId;

/// Declares the views, in tab order: `Tab => file::Type` each (the file's
/// module, and the field of [`Views`], are named `file`).
macro_rules! views {
    ($($(#[$doc:meta])* $tab:ident => $field:ident::$ty:ident,)+) => {
        $(pub mod $field;)+

        /// The views, in tab order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Tab {
            $($(#[$doc])* $tab,)+
        }

        impl Tab {
            /// Every view, in tab order.
            pub const ALL: &'static [Tab] = &[$(Tab::$tab,)+];

            /// The tab of a view's type (what [`Action::Show`] names); None
            /// for a type no line registers.
            pub fn of(view: TypeId) -> Option<Tab> {
                $(if view == TypeId::of::<$field::$ty>() {
                    return Some(Tab::$tab);
                })+
                None
            }
        }

        /// Each view's own state.
        #[derive(Debug, Clone, Default)]
        pub struct Views {
            $(pub $field: $field::$ty,)+
        }

        impl Views {
            /// The view of a tab.
            pub fn get(&self, tab: Tab) -> &dyn View {
                match tab {
                    $(Tab::$tab => &self.$field,)+
                }
            }

            /// The view of a tab, to give it a key or a change.
            pub fn get_mut(&mut self, tab: Tab) -> &mut dyn View {
                match tab {
                    $(Tab::$tab => &mut self.$field,)+
                }
            }
        }
    };
}

views! {
    /// While a run is (or was) live: progress, each rank, the GPUs and the
    /// training's output.
    Live => live::Live,
    /// Variants with their medians and verdicts (a single variant: its
    /// attempts).
    Matrix => matrix::Matrix,
    /// The selected process's memory over time, its phases and events.
    Timeline => timeline::Timeline,
    /// The selected process's events as a table.
    Events => events::Events,
    /// The attempt's processes; the one selected drives every view.
    Ranks => ranks::Ranks,
    /// The selected process's device memory at step-1 end, part by part.
    Account => account::Account,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_is_found_by_its_type_and_nothing_else_is() {
        assert_eq!(Tab::of(TypeId::of::<ranks::Ranks>()), Some(Tab::Ranks));
        assert_eq!(
            Tab::of(TypeId::of::<timeline::Timeline>()),
            Some(Tab::Timeline)
        );
        assert_eq!(Tab::of(TypeId::of::<overlay::Panel>()), None);
    }

    #[test]
    fn every_tab_has_its_own_view_and_title() {
        let views = Views::default();
        let titles: Vec<&str> = Tab::ALL.iter().map(|&t| views.get(t).title()).collect();
        let mut unique = titles.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), titles.len(), "{titles:?}");
    }
}
