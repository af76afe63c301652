"""The facts of :mod:`benchmarks.consolidation_recall`: contradiction pairs, and a
deterministic generator of varied "The user ..." facts to stand beside them.

**Pairs** (:data:`PAIRS`): a stored fact and a new fact that contradicts it with no
content word in common (checked by :func:`shared_words`, with the store's own
analyser and with a plain word check), e.g. "The user is vegetarian." / "The user
eats fish now.". Their stored facts are consistent with one another: one user holds
any number of them at once.

**Filler** (:func:`filler_facts`): facts from many domains (food, home, city, work,
family, friends, sports, hobbies, music, books, films, travel, health, devices,
languages, schedule, finances, vehicles, education, ...), each made of a template, a
*key* used at most once per user (a friend's name, a book's title: so that no two
facts of one user say different things of the same key) and other slots drawn at
random. No filler may contradict a pair's stored fact: the filler stays out of the
pairs' attributes (no diet, partner, children, siblings, pets owned, own car, job
title, hair, TV, phone, ...), and :data:`BANNED_TERMS` checks it (no filler holds one
of those terms once analysed).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache

from adk_sqlstore.search.analysis import analyzer

__all__ = [
    "BANNED_TERMS",
    "PAIRS",
    "Pair",
    "Template",
    "check_filler",
    "check_pairs",
    "filler_capacity",
    "filler_facts",
    "shared_words",
]


@dataclass(frozen=True)
class Pair:
    """A stored fact and a new fact that contradicts it."""

    key: str
    stored: str
    new: str


PAIRS: tuple[Pair, ...] = (
    Pair("diet", "The user is vegetarian.", "The user eats fish now."),
    Pair("city", "The user lives in Chicago.", "The user moved to Berlin last month."),
    Pair("car", "The user drives a Toyota Corolla.", "The user sold their car last spring."),
    Pair("job", "The user works as a nurse.", "The user became a software engineer in March."),
    Pair("single", "The user is single.", "The user got engaged to Priya over the holidays."),
    Pair(
        "pet",
        "The user has a cat named Miso.",
        "The user's only pet now is a golden retriever puppy.",
    ),
    Pair(
        "tobacco",
        "The user smokes cigars at weekend poker games.",
        "The user quit tobacco completely in January.",
    ),
    Pair(
        "alcohol", "The user drinks red wine most evenings.", "The user has been sober since May."
    ),
    Pair(
        "caffeine",
        "The user starts every morning with two espressos.",
        "The user gave up caffeine on doctor's orders.",
    ),
    Pair(
        "home",
        "The user rents a one-bedroom apartment downtown.",
        "The user bought a house in the suburbs.",
    ),
    Pair(
        "commute",
        "The user commutes by subway every weekday.",
        "The user rides a bicycle to the hospital these days.",
    ),
    Pair(
        "languages",
        "The user speaks only English.",
        "The user is fluent in Japanese after years of study.",
    ),
    Pair(
        "tennis",
        "The user plays tennis twice a week.",
        "The user gave up racket sports to focus on swimming.",
    ),
    Pair("marathons", "The user runs marathons.", "The user retired from long-distance races."),
    Pair(
        "violin",
        "The user plays the violin in a community orchestra.",
        "The user left the symphony group to focus on guitar.",
    ),
    Pair(
        "allergy",
        "The user is allergic to peanuts.",
        "The user finished oral immunotherapy and can eat nut butter safely.",
    ),
    Pair("children", "The user has no children.", "The user's daughter was born in August."),
    Pair("siblings", "The user is an only child.", "The user found out they have a half-brother."),
    Pair("phone", "The user has an iPhone 13.", "The user switched to a Google Pixel."),
    Pair(
        "computer",
        "The user works on a MacBook Air.",
        "The user's main computer is now a Linux desktop.",
    ),
    Pair(
        "gym",
        "The user has a gym membership at Equinox.",
        "The user let the fitness club contract lapse in April.",
    ),
    Pair(
        "bedtime",
        "The user goes to bed around 11 pm.",
        "The user sleeps during the day because of night shifts.",
    ),
    Pair("hair", "The user has long red hair.", "The user shaved their head last week."),
    Pair(
        "eyesight",
        "The user wears glasses.",
        "The user had laser eye surgery and sees perfectly.",
    ),
    Pair("team", "The user supports Manchester United.", "The user now cheers for Liverpool."),
    Pair(
        "motorcycle",
        "The user owns a motorcycle.",
        "The user got rid of the two-wheeler after a crash.",
    ),
    Pair(
        "bank",
        "The user banks with Chase.",
        "The user's checking account is now at a local credit union.",
    ),
    Pair(
        "loans",
        "The user is paying off student loans.",
        "The user cleared the last of that education debt in June.",
    ),
    Pair(
        "flying",
        "The user is afraid of flying.",
        "The user took three long-haul trips by plane this year.",
    ),
    Pair(
        "spice",
        "The user dislikes spicy food.",
        "The user orders extra-hot vindaloo every Friday.",
    ),
    Pair(
        "milk",
        "The user drinks oat milk.",
        "The user switched back to dairy from the farm down the road.",
    ),
    Pair(
        "blood pressure",
        "The user has high blood pressure.",
        "The user's hypertension resolved after losing weight.",
    ),
    Pair(
        "stamps",
        "The user collects vintage stamps.",
        "The user sold the whole philately album at auction.",
    ),
    Pair(
        "reading",
        "The user reads mostly science fiction.",
        "The user only picks up romance novels these days.",
    ),
    Pair(
        "television",
        "The user doesn't own a television.",
        "The user binge-watches Netflix on a new 65-inch screen.",
    ),
    Pair(
        "chess",
        "The user plays chess online every night.",
        "The user deleted all board-game apps to reduce screen time.",
    ),
    Pair(
        "studies",
        "The user is studying for a bachelor's degree in history.",
        "The user dropped out of university last autumn.",
    ),
    Pair("mother", "The user's mother lives in Lisbon.", "The user's mom relocated to Porto."),
    Pair("household", "The user lives alone.", "The user's grandmother moved in with them in May."),
    Pair(
        "vacation",
        "The user spends every summer at a lake cabin in Wisconsin.",
        "The user is not taking any vacation this year.",
    ),
    Pair(
        "volunteering",
        "The user volunteers at an animal shelter on Saturdays.",
        "The user no longer has free weekends for charity work.",
    ),
    Pair(
        "breakfast",
        "The user skips breakfast.",
        "The user eats a big bowl of porridge every morning.",
    ),
    Pair(
        "knitting",
        "The user knits scarves for friends.",
        "The user quit yarn crafts because of arthritis.",
    ),
    Pair(
        "music",
        "The user's favourite music genre is jazz.",
        "The user now prefers heavy metal above everything.",
    ),
    Pair(
        "religion",
        "The user goes to church every Sunday.",
        "The user stopped attending religious services.",
    ),
    Pair(
        "investing",
        "The user invests monthly in index funds.",
        "The user put everything into cryptocurrency.",
    ),
    Pair("colour", "The user's favourite colour is blue.", "The user likes green best."),
    Pair("beard", "The user has a beard.", "The user is clean-shaven these days."),
)

# -- the no-shared-word check -----------------------------------------------------------

# The plain check's stop words: English function words, auxiliaries, and words every
# fact has ("user", "the"). Content words are what is left.
_STOP = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing don't doesn't down during
    each few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your these days last every user user's they're
    """.split()
)


def _plain_words(text: str) -> set[str]:
    """Lower-case words, stop words out, crudely stemmed (plural and -ing/-ed/-er)."""
    words = set()
    for word in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower()):
        word = word.removesuffix("'s")
        if word in _STOP or len(word) < 2:
            continue
        for suffix in ("ing", "ed", "es", "s", "er"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        words.add(word)
    return words


@cache
def _terms(text: str) -> frozenset[str]:
    """The store's own index terms (Snowball stems, its stop words out), minus "user"."""
    return frozenset(analyzer().index_terms(text)) - {"user"}


def shared_words(a: str, b: str) -> set[str]:
    """The content words ``a`` and ``b`` have in common: by the store's analyser (what
    BM25 matches on) and by a plain check (lower-case words minus a stop list, crudely
    stemmed). Empty for a pair that only meaning links."""
    return set(_terms(a) & _terms(b)) | (_plain_words(a) & _plain_words(b))


def check_pairs(pairs: Sequence[Pair] = PAIRS) -> None:
    """Raise ``AssertionError`` if two facts of a pair share a content word, or if keys
    or texts repeat."""
    assert len({p.key for p in pairs}) == len(pairs), "pair keys repeat"
    texts = [t for p in pairs for t in (p.stored, p.new)]
    assert len(set(texts)) == len(texts), "pair texts repeat"
    for p in pairs:
        assert p.stored.startswith("The user") and p.new.startswith("The user"), p
        common = shared_words(p.stored, p.new)
        assert not common, f"pair {p.key!r} shares {sorted(common)}"


# -- the filler -------------------------------------------------------------------------

# Words no filler fact may hold (once analysed: their stems): the pairs' attributes,
# so that no filler contradicts a pair's stored fact (nor says another thing of the
# same attribute: a second diet, a partner, a sibling, another car, a phone, ...).
BANNED_WORDS = """
    vegetarian vegan meat fish salmon tuna shrimp seafood chicken beef pork bacon steak
    ham sausage lamb sushi anchovies burger berlin car cars toyota corolla software
    single girlfriend boyfriend husband wife partner fiance engaged priya cat cats kitten
    miso puppy pet pets smoke smoking cigar cigarette tobacco vape wine beer alcohol
    whisky vodka cocktail bourbon sober coffee espresso latte cappuccino caffeine
    apartment downtown house suburbs subway commute commuting bicycle cycling english
    japanese fluent speaks tennis racket badminton squash swimming marathon jogging
    violin orchestra symphony guitar peanut peanuts nut nuts allergic allergy child
    children daughter son brother sister siblings niece nephew half iphone phone pixel
    android samsung macbook linux desktop computer gym equinox membership fitness
    bedtime night shifts hair bald shaved beard glasses lenses eyes manchester
    liverpool football soccer motorcycle harley bank banks chase credit loans debt
    student flying flight plane airport airplane spicy spice chili jalapeno curry
    vindaloo milk dairy oat blood pressure hypertension stamps philately fiction
    romance television tv netflix screen chess degree bachelor university college
    mother mom lisbon porto alone grandmother vacation volunteers shelter charity
    breakfast porridge oatmeal knits yarn scarves crafts favourite favorite genre jazz
    church religious worship invests index funds crypto cryptocurrency bitcoin stocks
    colour color
"""
BANNED_TERMS = frozenset(analyzer().index_terms(BANNED_WORDS))
"""The stems of :data:`BANNED_WORDS` (so "nursing" and "apartments" count too)."""


@dataclass(frozen=True)
class Template:
    """Facts of one shape: a phrasing (drawn at random) with ``{key}`` and the other
    ``slots`` filled in; each key value is used at most once per user."""

    domain: str
    phrasings: tuple[str, ...]
    key: tuple[str, ...]
    slots: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def facts(self, rng: random.Random) -> Iterator[str]:
        keys = list(self.key)
        rng.shuffle(keys)
        for key in keys:
            values = {name: rng.choice(options) for name, options in self.slots.items()}
            # the key first: a key may hold slots of its own ("... on {day}s")
            text = rng.choice(self.phrasings).replace("{key}", key).format(**values)
            yield text[0].upper() + text[1:]


def _t(domain: str, phrasings: str | Sequence[str], key: str, **slots: str) -> Template:
    """A template; ``key`` and each slot are ``|``-separated values."""
    said = (phrasings,) if isinstance(phrasings, str) else tuple(phrasings)
    return Template(
        domain,
        said,
        tuple(_split(key)),
        {name: tuple(_split(values)) for name, values in slots.items()},
    )


def _split(values: str) -> list[str]:
    return [v.strip() for v in values.split("|") if v.strip()]


def _first(values: str, count: int) -> str:
    """The first ``count`` of ``|``-separated values (friends of fewer templates)."""
    return "|".join(_split(values)[:count])


def _articled(values: str) -> str:
    """``|``-separated nouns with "a" or "an" before each."""
    return "|".join(("an " if v[0] in "aeiou" else "a ") + v for v in _split(values))


FRIENDS = (
    "Maya|Jonah|Aisha|Tomás|Hannah|Kenji|Olivia|Marcus|Ingrid|Rafael|Chloe|Dmitri|Fatima|"
    "Lucas|Nadia|Oscar|Beatriz|Ethan|Yara|Felix|Grace|Hiroshi|Isabel|Jamal|Katya|Liam|"
    "Mei|Nico|Amara|Pablo|Quinn|Rosa|Stefan|Tariq|Uma|Victor|Wren|Ximena|Yusuf|Zoe|"
    "Anders|Bianca|Caleb|Daria|Emeka|Freya|Gabriel|Helena|Ibrahim|Juno|Kofi|Lena|Mateo|"
    "Noor|Otto|Paloma|Rhys|Sofia|Theo|Valentina|Abel|Brigid|Cyrus|Delphine|Elias|Farah|"
    "Gideon|Hazel|Imani|Jasper|Kirra|Leon|Marisol|Nils|Odette|Percy|Ruth|Silas|Tamsin|"
    "Ulrich|Adaeze|Bastian|Celeste|Dario|Esme|Florian|Greta|Hamza|Ilse|Joaquin|Keziah|"
    "Lorcan|Mirela|Nikhil|Orla|Pilar|Rasmus|Saoirse|Tobias|Vera|Wendell|Yasmin|Zander|"
    "Alma|Benedikt|Carmen|Declan|Elif|Fintan|Giulia|Henrik|Inez|Jude|Kaito|Lucia|Magnus|"
    "Nell|Omar|Petra|Rowan"
)
COWORKERS = (
    "Denise|Arturo|Bev|Carlos|Dolores|Ed|Frances|Gus|Harriet|Ivan|Janelle|Kurt|Lorraine|"
    "Manny|Nora|Orlando|Patty|Reggie|Shirley|Terrence|Val|Wanda|Yolanda|Zeke|Agnes|Bruno|"
    "Corinne|Desmond|Estelle|Floyd|Gloria|Hector|Irene|Jerome|Kathleen|Lionel|Marguerite|"
    "Neville|Opal|Prakash|Rosalind|Stan|Trudy|Ulysses|Vivian|Walt|Yvette|Xavier|Bettina|"
    "Clyde"
)
NEIGHBOURS = (
    "Mrs. Kowalski|Mr. Haddad|Dolly|Raymond|the Nguyens|Ms. Okafor|Bernard|the Garcias|"
    "Mr. Lindqvist|Tess|old Mr. Abernathy|the Patels|Lucille|Mr. Moreau|Gwen|the Fischers|"
    "Ines|Mr. Takahashi|Beatrix|the O'Briens"
)
CITIES = (
    "Denver|Seattle|Austin|Portland|Toronto|Montreal|Boston|Atlanta|Minneapolis|Nashville|"
    "San Diego|Philadelphia|Vancouver|Mexico City|Dublin|Edinburgh|Amsterdam|Copenhagen|"
    "Melbourne|Cape Town|Barcelona|Vienna|Seoul|Oaxaca|Tucson|Pittsburgh|Madison|"
    "Savannah|Raleigh|Santa Fe"
)
YEARS = "2009|2011|2013|2014|2015|2016|2017|2018|2019|2020|2021|2022|2023|2024"
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
WEEKDAYS = "Monday|Tuesday|Wednesday|Thursday|Friday"
PROFESSIONS = (
    "pastry chef|dentist|high school math teacher|carpenter|public defender|pharmacist|"
    "graphic designer|firefighter|architect|veterinarian|park ranger|sound engineer|"
    "librarian|electrician|physical therapist|urban planner|tattoo artist|pilot|"
    "wedding photographer|marine biologist|accountant|midwife|brewery owner|translator|"
    "florist|paramedic|data analyst|museum curator|bus driver|yoga instructor|"
    "real estate agent|journalist|pediatrician|landscape architect|sommelier|"
    "airline mechanic|social worker|baker|puppeteer|commercial diver"
)
BOOKS = (
    "Dune|The Left Hand of Darkness|Project Hail Mary|Piranesi|The Overstory|Circe|"
    "Station Eleven|A Gentleman in Moscow|The Remains of the Day|Educated|Sapiens|"
    "The Name of the Wind|Hyperion|The Martian|Klara and the Sun|Pachinko|Middlemarch|"
    "The Count of Monte Cristo|Neuromancer|The Dispossessed|Beloved|The Goldfinch|"
    "Lonesome Dove|The Road|Homegoing|The Hobbit|Foundation|Snow Crash|Rebecca|"
    "East of Eden|The Three-Body Problem|Never Let Me Go|Cloud Atlas|Anxious People|"
    "The Power Broker|Kindred|Wolf Hall|Life of Pi|The Thursday Murder Club|Leviathan Wakes|"
    "Tomorrow, and Tomorrow, and Tomorrow|The Secret History|Braiding Sweetgrass|"
    "A Psalm for the Wild-Built|The Midnight Library|Lessons in Chemistry|Frankenstein|"
    "Moby-Dick|Mrs Dalloway|The Sparrow|Gideon the Ninth|Ender's Game|The Sellout|"
    "The Book Thief|Shantaram|The Poisonwood Bible|Born a Crime|Educating Rita|Hamnet|"
    "The Wind-Up Bird Chronicle|Norwegian Wood|The Bell Jar|Americanah|The Kite Runner|"
    "Jane Eyre|Great Expectations|The Handmaid's Tale|Fahrenheit 451|The Hitchhiker's "
    "Guide to the Galaxy|Good Omens|The Road to Wigan Pier|Little Dorrit|Lincoln in the "
    "Bardo|The Nickel Boys|Demon Copperhead|The Covenant of Water|Tress of the Emerald "
    "Sea|The Ministry for the Future|A Little Life|Olive Kitteridge|Where the Crawdads "
    "Sing"
)
FILMS = (
    "Spirited Away|Casablanca|The Grand Budapest Hotel|Arrival|Paddington 2|Amélie|"
    "Parasite|Before Sunrise|Jaws|Alien|The Princess Bride|Moonlight|Singin' in the Rain|"
    "Rear Window|My Neighbor Totoro|Lost in Translation|Whiplash|Coco|Up|Ratatouille|"
    "The Shawshank Redemption|Back to the Future|Her|Roma|Little Women|Knives Out|"
    "Everything Everywhere All at Once|Hidden Figures|The Big Lebowski|Fargo|"
    "Groundhog Day|Inside Out|Howl's Moving Castle|Some Like It Hot|North by Northwest|"
    "Call Me by Your Name|The Lion King|Mad Max: Fury Road|Brooklyn|Past Lives|Tampopo|"
    "Chungking Express|Sunset Boulevard|Cinema Paradiso|Stand by Me|Hugo|Wall-E|"
    "Portrait of a Lady on Fire|The Iron Giant|Sense and Sensibility|Amadeus|Heat|"
    "The Sound of Music|Some Kind of Heaven|Minari|Paris, Texas|The Farewell|Lady Bird|"
    "Nomadland|The Truman Show|Moonstruck|Tootsie|Chocolat|Chef|Julie & Julia|"
    "The Third Man"
)
ARTISTS = (
    "Fleetwood Mac|Lizzo|Radiohead|Bon Iver|Beyoncé|Vampire Weekend|Mitski|The National|"
    "Kacey Musgraves|Hozier|Sufjan Stevens|Arcade Fire|Florence and the Machine|"
    "Tame Impala|Phoebe Bridgers|Wilco|Chance the Rapper|Adele|Coldplay|Taylor Swift|"
    "Yo-Yo Ma|Brandi Carlile|The Lumineers|Janelle Monáe|Paul Simon|Stevie Wonder|"
    "Lorde|Khruangbin|The Black Keys|Fiona Apple|Alabama Shakes|Bruce Springsteen|"
    "Leon Bridges|Haim|St. Vincent|The Killers|Yo La Tengo|Billie Eilish|Nick Cave|"
    "Angel Olsen|Dolly Parton|Sigur Rós|Andrew Bird|Big Thief|Rufus Wainwright|"
    "Jason Isbell|Norah Jones|Kendrick Lamar|Regina Spektor|Feist|Fleet Foxes|"
    "The War on Drugs|Courtney Barnett|Jack White|Sharon Van Etten|Natalie Merchant|"
    "Ben Folds|The Decemberists|Nina Simone tribute band|Patti Smith"
)

TEMPLATES: tuple[Template, ...] = (
    # food and drink
    _t(
        "food",
        (
            "the user loves {key}.",
            "the user really enjoys {key}.",
            "the user often orders {key} when eating out.",
            "the user makes {key} {when}.",
        ),
        "mushroom risotto|margherita pizza|falafel wraps|caprese salad|spinach lasagna|"
        "vegetable dumplings|lentil soup|macaroni and cheese|eggplant parmesan|"
        "butternut pumpkin ravioli|Greek salad|avocado toast|tomato bisque|pesto pasta|"
        "bean burritos|halloumi skewers|spanakopita|potato gnocchi|vegetable paella|"
        "mushroom stroganoff|pumpkin soup|spinach quiche|cauliflower cheese|ratatouille|"
        "minestrone|gazpacho|tabbouleh|hummus with warm pita|grilled cheese sandwiches|"
        "pierogi|potato latkes|blueberry pancakes|tofu stir-fry|vegetable tempura|"
        "cheese fondue|polenta with mushrooms|stuffed bell peppers|corn chowder|"
        "broccoli cheddar soup|baked ziti|French toast|egg fried rice|mushroom tacos|"
        "sweet potato gnocchi|ricotta crepes|shakshuka without the harissa",
        when="on Sunday evenings|for friends|when it rains|after long walks|twice a month",
    ),
    _t(
        "food",
        ("the user bakes {key} {when}.", "the user taught themselves to bake {key} {when}."),
        "sourdough bread|banana bread|cinnamon rolls|focaccia|apple pie|lemon bars|"
        "chocolate chip cookies|carrot cake|scones|brioche|bagels|soft pretzels|croissants|"
        "pumpkin pie|cheesecake|brownies|blueberry muffins|baguettes|rye bread|challah|"
        "shortbread|biscotti|pita bread|olive bread|cardamom buns",
        when="on rainy afternoons|for birthdays at work|most weekends|around Thanksgiving|"
        "during the winter",
    ),
    _t(
        "food",
        (
            "the user buys {key} at the Green City farmers market.",
            "the user picks up {key} from the corner grocery on {day}s.",
        ),
        "heirloom tomatoes|sweet corn|Michigan peaches|local honey|fresh basil|goat cheese|"
        "strawberries|Honeycrisp apples|chanterelle mushrooms|kale|free-range eggs|"
        "maple syrup|sunflowers|Bartlett pears|plums|sour cherries|zucchini|beets|"
        "radishes|rhubarb|asparagus|blackberries",
        day=WEEKDAYS,
    ),
    _t(
        "food",
        ("the user drinks {key} tea {when}.", "the user keeps a tin of {key} tea at work."),
        "jasmine|chamomile|Earl Grey|rooibos|peppermint|oolong|hibiscus|ginger|lemon balm|"
        "genmaicha|white peony|lavender",
        when="in the afternoon|when it snows|while reading|after dinner",
    ),
    _t(
        "food",
        "the user learned to make {key} from {teacher}.",
        "fresh pasta|vegetable dumplings|pizza dough|naan|tamales with cheese and peppers|"
        "crepes|pierogi|empanadas|strawberry jam|granola|pesto|vanilla ice cream|"
        "tortillas|bao buns|pickled cucumbers|sauerkraut|gnocchi|lemonade|mango lassi|"
        "hand-pulled noodles",
        teacher="a YouTube channel|their grandfather|a weekend cooking class|an old cookbook|"
        "a coworker|an aunt in Texas|a library workshop",
    ),
    _t(
        "food",
        ("the user can't stand {key}.", "the user always asks for no {key}."),
        "cilantro|mayonnaise|olives|raisins in baked goods|blue cheese|licorice|"
        "canned peas|coconut flakes|black jelly beans|celery",
    ),
    # travel
    _t(
        "travel",
        (
            "the user dreams of visiting {key} someday.",
            "the user has {key} on their bucket list.",
            "the user hopes to see {key} one day.",
        ),
        "Patagonia|Kyoto|the Northern Lights in Norway|Machu Picchu|the Amalfi Coast|"
        "Iceland's ring road|the Galápagos Islands|Petra|Banff|Yellowstone|"
        "the Scottish Highlands|New Zealand's South Island|Santorini|Cappadocia|Marrakech|"
        "Hanoi|the Great Barrier Reef|Bali|Prague|Budapest|Buenos Aires|Havana|"
        "Quebec City|Zion National Park|the Grand Canyon|Alaska|the Faroe Islands|Lapland|"
        "Taipei|Tasmania|the Dolomites|Lake Como|Cinque Terre|Istanbul|Wadi Rum|"
        "the Canadian Rockies|Hokkaido|the Camino de Santiago|Angkor Wat|the fjords",
    ),
    _t(
        "travel",
        (
            "the user took the train to {key} in {year}.",
            "the user drove to {key} for a long weekend in {year}.",
            "the user spent a few days in {key} in {month} {year}.",
        ),
        "New Orleans|Door County|Mackinac Island|Nashville|Memphis|St. Louis|Milwaukee|"
        "Madison|Indianapolis|Detroit|Cleveland|Louisville|Kansas City|Galena|"
        "the Indiana Dunes|Starved Rock|Traverse City|Ann Arbor|Cincinnati|Niagara Falls|"
        "Columbus|Des Moines|Omaha|Sleeping Bear Dunes|Duluth|Springfield|Asheville|"
        "the Upper Peninsula|Holland, Michigan|Lake Geneva",
        year=YEARS,
        month=MONTHS,
    ),
    _t(
        "travel",
        "the user once rented {key} for a road trip through {place}.",
        "a camper van|a convertible|a canoe|a tandem kayak|a houseboat|a pickup truck",
        place="Utah|the Ozarks|Vermont|the Black Hills|Maine|the Smoky Mountains",
    ),
    # friends
    _t(
        "friends",
        ("the user's friend {key} is {job}.", "the user's friend {key} works as {job}."),
        FRIENDS,
        job=_articled(PROFESSIONS),
    ),
    _t(
        "friends",
        (
            "the user's friend {key} lives in {city}.",
            "the user's friend {key} just moved to {city}.",
            "the user's old friend {key} is based in {city}.",
        ),
        FRIENDS,
        city=CITIES,
    ),
    _t(
        "friends",
        "the user's friend {key} {event}.",
        FRIENDS,
        event="is getting married in the fall|just had twins|started a small bakery|"
        "adopted a greyhound|is training for a triathlon|finished a PhD in physics|"
        "opened a record shop|is recovering from knee surgery|bought a sailboat|"
        "is learning to make furniture|is writing a mystery novel|got a job at NASA|"
        "is hiking the Pacific Crest Trail|started a podcast about birds|"
        "is moving abroad next year|won a local baking contest",
    ),
    _t(
        "friends",
        (
            "the user bought {gift} for {key}'s birthday.",
            "the user is planning to give {key} {gift} for their birthday.",
        ),
        _first(FRIENDS, 80),
        gift="a pottery class|a vintage map|a houseplant|concert tickets|a board of "
        "handmade soaps|a photo book|a cast-iron pan|a weekend workshop|a pair of "
        "wool socks|a signed print|a sourdough starter|a set of watercolors",
    ),
    _t(
        "friends",
        "the user met {key} {where}.",
        _first(FRIENDS, 80),
        where="in a pottery class|on a hiking trip|at a friend's wedding|in a book club|"
        "in nursing school|at a summer camp years ago|through a neighbor|on a train to "
        "New Orleans|at a community garden|in a choir|at a climbing wall|"
        "while waiting in line for concert tickets",
    ),
    _t(
        "friends",
        (
            "the user's friend {key} recommended {title}.",
            "the user borrowed {title} from {key}.",
        ),
        _first(FRIENDS, 60),
        title=BOOKS,
    ),
    _t(
        "friends",
        "the user's friend {key} is really into {hobby}.",
        _first(FRIENDS, 60),
        hobby="bouldering|birdwatching|sourdough|vinyl records|Lego sets|trail running "
        "shoes|mushroom foraging|stand-up comedy|salsa verde recipes|astronomy|fountain "
        "pens|retro synthesizers|houseplants|crossword puzzles|bonsai",
    ),
    # work (consistent with the user's job, naming no job title)
    _t(
        "work",
        "the user's coworker {key} {trait}.",
        COWORKERS,
        trait="always brings homemade cookies|is training the new hires|swaps weekends "
        "with the user|organizes karaoke evenings|is retiring next spring|just "
        "transferred to pediatrics|takes the same train home as the user|keeps a jar of "
        "candy at the station|is the union representative|leads the Wednesday "
        "huddle|runs the unit's holiday party|is studying to be a midwife",
    ),
    _t(
        "work",
        (
            "the user often eats lunch with {key} from the {unit}.",
            "the user trained {key} from the {unit} last year.",
        ),
        COWORKERS,
        unit="cardiology unit|emergency department|maternity ward|oncology floor|ICU|"
        "pharmacy|radiology department|surgical wing",
    ),
    _t(
        "work",
        (
            "the user is certified in {key}.",
            "the user renewed their {key} certification in {month}.",
        ),
        "basic life support|advanced cardiac life support|wound care|IV therapy|"
        "pediatric advanced life support|trauma care|infection control",
        month=MONTHS,
    ),
    _t(
        "work",
        "the user {key}.",
        "sits on the hospital's patient safety committee|mentors two new graduates|"
        "keeps snacks in their locker for long days|wears purple clogs at work|"
        "has a standing meeting with their manager on Thursdays|wrote a guide to the "
        "unit's new charting system|earns extra pay for holiday cover|carries a pocket "
        "notebook at work",
    ),
    # family (parents' and cousins' news; no siblings, children or partner)
    _t(
        "family",
        (
            "the user's {key} lives in {city}.",
            "the user's {key} recently settled in {city}.",
        ),
        "father|aunt Rosa|uncle Dev|cousin Leila|cousin Tom|grandfather|godmother Helen|"
        "aunt Marguerite|uncle Kwame|cousin Ana|cousin Mikko|great-aunt Edith|uncle Luis|"
        "aunt Sunita|cousin Bram",
        city=CITIES,
    ),
    _t(
        "family",
        (
            "the user's {key} is a retired {bare}.",
            "the user's {key} used to work as {job}.",
        ),
        "father|aunt Rosa|uncle Dev|grandfather|godmother Helen|aunt Marguerite|"
        "uncle Kwame|great-aunt Edith|uncle Luis|aunt Sunita",
        job=_articled(PROFESSIONS),
        bare=PROFESSIONS,
    ),
    _t(
        "family",
        "the user's {key} {news}.",
        "cousin Leila|cousin Tom|cousin Ana|cousin Mikko|cousin Bram|father|uncle Dev|aunt Rosa",
        news="is turning sixty this year|visits every October|sends a postcard from every "
        "trip|just had hip surgery|restores old clocks|grows prize-winning dahlias|"
        "is running for the school board|plays bridge every week",
    ),
    # books, films, music, podcasts
    _t(
        "books",
        (
            "the user recently finished reading {key}.",
            "the user is halfway through {key}.",
            "the user's book club picked {key} for {month}.",
            "the user gave up on {key} after a hundred pages.",
        ),
        BOOKS,
        month=MONTHS,
    ),
    _t(
        "films",
        (
            "the user rewatched {key} on their laptop recently.",
            "the user cried at the end of {key}.",
            "the user saw {key} at the Music Box Theatre.",
            "the user quotes {key} a lot.",
        ),
        FILMS,
    ),
    _t(
        "music",
        (
            "the user saw {key} live in {year}.",
            "the user has tickets to see {key} in {month}.",
            "the user knows every song on the first {key} album.",
        ),
        ARTISTS,
        year=YEARS,
        month=MONTHS,
    ),
    _t(
        "music",
        "the user has a playlist of {key} for {activity}.",
        "80s synth-pop|bossa nova|lo-fi hip hop|classic Motown|indie folk|film scores|"
        "Afrobeat|baroque harpsichord|K-pop|90s grunge|reggae|bluegrass|disco|"
        "ambient electronica|sea shanties|Celtic folk|Brazilian samba",
        activity="cleaning|studying|cooking|long walks|rainy days|getting ready in the morning",
    ),
    _t(
        "music",
        "the user listens to the {key} podcast {when}.",
        "Radiolab|99% Invisible|Hidden Brain|Serial|This American Life|Reply All|"
        "Freakonomics Radio|Song Exploder|The Moth|Planet Money|Criminal|Revisionist "
        "History|Ologies|Decoder Ring|Stuff You Should Know|No Such Thing as a Kangaroo|"
        "Dolly Parton's America|The Dollop|Conan O'Brien Needs a Friend|Science Vs",
        when="while cooking|on walks|while folding laundry|on the weekend|before work",
    ),
    _t(
        "music",
        ("the user is learning {key}.", "the user took up {key} in {year}."),
        "the ukulele|the harmonica|the piano|the banjo|the tin whistle|the cello",
        year=YEARS,
    ),
    # hobbies
    _t(
        "hobbies",
        (
            "the user took up {key} in {year}.",
            "the user has been into {key} since {year}.",
            "the user spends most Thursday evenings on {key}.",
        ),
        "pottery|rock climbing|birdwatching|watercolor painting|film photography|"
        "calligraphy|woodworking|swing dancing|bouldering|jigsaw puzzles|crossword puzzles|"
        "origami|embroidery|geocaching|kayaking|archery|fencing|yoga|pilates|meditation|"
        "journaling|improv comedy|paddleboarding|ice skating|bonsai|sketching|"
        "scrapbooking|candle making|astronomy|cross-country skiing|quilting|Lego building",
        year=YEARS,
    ),
    _t(
        "hobbies",
        ("the user recently bought {key}.", "the user got {key} as a gift in {month}."),
        "a new pair of hiking boots|a cast-iron skillet|a stand mixer|a telescope|"
        "a bird feeder for the balcony|a rice cooker|a label maker|a weighted blanket|"
        "an air purifier|a standing desk|a robot vacuum|a rain jacket|"
        "noise-cancelling headphones|a camping hammock|a sewing machine|a drawing tablet|"
        "a film camera|a dehumidifier|a pair of snowshoes|a yoga mat|a two-person tent|"
        "a bread machine|a grow light for herbs|a pasta maker|a tabletop easel|"
        "a pottery kit|a hand-crank pencil sharpener|a waffle iron",
        month=MONTHS,
    ),
    _t(
        "hobbies",
        "the user can {key}.",
        "solve a Rubik's cube in under two minutes|juggle three balls|whistle with two "
        "fingers|touch-type at ninety words per minute|do a handstand|identify birds by "
        "their songs|tie a bowline knot|fold a paper crane|recite the periodic table|"
        "wiggle their ears|name every US state capital",
    ),
    _t(
        "hobbies",
        (
            "the user finds {key} relaxing.",
            "the user says {key} helps them unwind.",
        ),
        "the sound of rain|long baths|ironing shirts|organizing bookshelves|folding "
        "laundry|watering plants|washing dishes by hand|thunderstorms|walking in fresh "
        "snow|the smell of old books|repotting plants|sorting old photographs",
    ),
    # sports (watching; playing, no racket sport, running or gym)
    _t(
        "sports",
        (
            "the user follows the {key}.",
            "the user goes to a {key} game every season.",
        ),
        "Chicago Cubs|Chicago Bulls|Chicago Blackhawks|Chicago Bears|Chicago Sky|"
        "Chicago White Sox|Chicago Red Stars",
    ),
    _t(
        "sports",
        "the user watches {key} every year.",
        "the Tour de France|the Super Bowl|the World Series|the Kentucky Derby|"
        "the NBA playoffs|the Winter Olympics|the Stanley Cup final|the Indy 500",
    ),
    _t(
        "sports",
        "the user plays {key} {when}.",
        "pickup basketball|beach volleyball|ultimate frisbee|league bowling|softball|"
        "golf|disc golf|darts|billiards|cornhole",
        when="with coworkers|on Wednesday evenings|in the summer|once a month|with "
        "neighbors|when friends visit",
    ),
    # health
    _t(
        "health",
        ("the user had {key} in {year}.", "the user's {key} was in {year}."),
        "their wisdom teeth removed|a broken wrist|an appendectomy|a tonsillectomy|"
        "a sprained ankle|a bad case of shingles|a concussion from a ski fall|"
        "knee arthroscopy|a kidney stone|a torn rotator cuff|pneumonia|mononucleosis|"
        "a root canal|a dislocated shoulder|a fractured toe|bronchitis",
        year=YEARS,
    ),
    _t(
        "health",
        "the user takes {key} {when}.",
        "vitamin D|magnesium|a probiotic|iron tablets|vitamin B12|zinc|an antihistamine in spring",
        when="every day|most days|in the winter|when they remember",
    ),
    _t(
        "health",
        "the user sees a {key} {when}.",
        "physiotherapist|dermatologist|dentist|therapist|chiropractor|podiatrist",
        when="twice a year|every month|every few weeks|once a year",
    ),
    _t(
        "health",
        "the user is mildly sensitive to {key}.",
        "pollen|dust mites|latex|ragweed|mold",
    ),
    # home (consistent with a rented one-bedroom: no owning, no house)
    _t(
        "home",
        (
            "the user keeps {key} on the windowsill.",
            "the user has {key} in the living room.",
            "the user is trying to keep {key} alive.",
        ),
        "a fiddle-leaf fig|a pothos|a snake plant|a small herb garden|a monstera|"
        "a row of succulents|an orchid|a bonsai juniper|a cactus collection|a peace lily|"
        "a rubber plant|a spider plant|a string of pearls|a pot of basil|a lemon tree",
    ),
    _t(
        "home",
        "the user recently put up {key} in the hallway.",
        "a coat rack|framed concert posters|a corkboard of postcards|a mirror from a flea "
        "market|a shelf of travel souvenirs|string lights|a world map",
    ),
    _t(
        "home",
        "the user's building has {key}.",
        "a rooftop deck|a shared laundry room|radiator heat|an elevator that often "
        "breaks|a doorman named Walter|a bike room in the basement|a courtyard garden",
    ),
    _t(
        "home",
        "the user {key}.",
        "does the laundry on {day} evenings|waters the plants every {day}|cleans the "
        "bathroom on {day}s|meal-preps lunches on {day}s|takes out the recycling on "
        "{day}s|updates the budget spreadsheet every {day}|backs up the laptop every "
        "{day}|calls their father on {day} evenings",
        day=WEEKDAYS,
    ),
    # city (Chicago)
    _t(
        "city",
        (
            "the user likes walking along {key}.",
            "the user often takes visitors to {key}.",
        ),
        "the Lakefront Trail|the Riverwalk|the 606 trail|Lincoln Park|Millennium Park|"
        "Montrose Beach|Promontory Point|the Magnificent Mile|Humboldt Park|"
        "the Garfield Park Conservatory|Navy Pier|Grant Park|the Art Institute|"
        "Maxwell Street Market",
    ),
    _t(
        "city",
        "the user often eats at {key} in {hood}.",
        "Little Lantern|the Green Fork|Casa Amapola|Nonna's Table|Sesame & Sage|"
        "the Blue Door Diner|Pho Lotus|Falafel Corner|the Pierogi Place|Taqueria Sol|"
        "Kitchen Nine|the Dumpling Den|Café Marisol|Lotus Garden|Pizzeria Uno",
        hood="Logan Square|Pilsen|Andersonville|Wicker Park|Hyde Park|Lakeview|"
        "Chinatown|Uptown|Bridgeport|Rogers Park",
    ),
    _t(
        "city",
        "the user shops for clothes at {key}.",
        "Uniqlo|Patagonia|a thrift store in Wicker Park|Everlane|Target|REI|Zara|"
        "Nordstrom Rack|Madewell|a vintage shop in Andersonville",
    ),
    # clothing
    _t(
        "style",
        ("the user owns {key}.", "the user wears {key} a lot."),
        "a green wool coat|a vintage leather jacket|a yellow raincoat|a collection of "
        "band T-shirts|several pairs of Converse sneakers|a navy blazer|a pair of cowboy "
        "boots|a silver watch from their father|a corduroy overshirt|a Hawaiian shirt "
        "from a thrift store|a Cubs cap signed by Ryne Sandberg|a hand-me-down trench coat",
    ),
    # devices (none that is a phone, a computer or a TV)
    _t(
        "devices",
        ("the user uses {key} {purpose}.", "the user relies on {key} {purpose}."),
        "a Kindle Paperwhite|AirPods Pro|an Apple Watch|a Nintendo Switch|an iPad|"
        "a Sonos speaker|a Raspberry Pi|a mechanical keyboard|an external SSD|"
        "a smart thermostat|a Garmin watch|a Canon DSLR|a GoPro|a Bluetooth label printer",
        purpose="every day|for work|on weekends|for hobby projects|while traveling",
    ),
    _t(
        "devices",
        ("the user is playing {key} on the Switch.", "the user finished {key} last winter."),
        "The Legend of Zelda: Tears of the Kingdom|Stardew Valley|Animal Crossing|"
        "Hades|Celeste|Hollow Knight|Mario Kart 8|Super Mario Odyssey|Untitled Goose Game|"
        "Spiritfarer|Breath of the Wild|Metroid Dread|Pikmin 4|Splatoon 3|Kirby and the "
        "Forgotten Land|Tetris 99",
    ),
    # languages (hopes only: the user speaks English only)
    _t(
        "languages",
        (
            "the user hopes to learn {key} one day.",
            "the user wishes they had learned {key} growing up.",
        ),
        "Italian|Korean|Swahili|Greek|Irish|Hindi|Turkish",
    ),
    # schedule
    _t(
        "schedule",
        "the user has {key} on {day}.",
        "a dentist appointment|a haircut booked|a pottery class|a call with the landlord|"
        "a book club meeting|a street fair nearby|a physical therapy session|"
        "a dinner reservation at Little Lantern|a library book due|a delivery coming",
        day="Monday|Tuesday|Wednesday|Thursday|Friday|the 14th|the 3rd|the 21st",
    ),
    _t(
        "schedule",
        "the user is going to {key} in {month}.",
        "a cousin's wedding in Atlanta|a pottery workshop|a nursing conference|"
        "a high school reunion|a comedy show at Second City|a members' evening at the art "
        "museum|a friend's baby shower|a reading by an author they admire|"
        "a silent retreat|a farm stay in Iowa|a choir concert|a food festival",
        month=MONTHS,
    ),
    # finances (none that banks, lends or invests)
    _t(
        "finances",
        (
            "the user is saving up for {key}.",
            "the user puts money aside every month for {key}.",
        ),
        "a sabbatical|new furniture|a better camera|a used piano|a pottery wheel|"
        "a down payment someday|a trip along the Pacific coast|new winter boots|"
        "a rainy-day cushion",
    ),
    _t(
        "finances",
        "the user budgets ${amount} a month for {key}.",
        "groceries|eating out|books|gifts|hobby supplies|streaming music|clothes|houseplants",
        amount="40|60|80|100|150|200|250|300",
    ),
    _t(
        "finances",
        "the user donates to {key} every December.",
        "the Greater Chicago Food Depository|Doctors Without Borders|the ACLU|"
        "the public library foundation|the Red Cross|Wikipedia|the public radio station|"
        "a pediatric hospital",
    ),
    _t(
        "finances",
        "the user subscribes to {key}.",
        "The New Yorker|National Geographic|Spotify Premium|a meal-kit delivery|Wired|"
        "The Atlantic|Audible|a local farm box|The Economist|the Chicago Tribune|"
        "a woodworking channel on Patreon",
    ),
    # vehicles (licences, rentals, transit: no other vehicle of the user's own)
    _t(
        "vehicles",
        "the user {key}.",
        "renewed their driver's license in {month}|keeps a Ventra card topped up for the "
        "bus|once drove a U-Haul across three states|learned to drive a manual "
        "transmission in {year}|got a parking ticket in {month} and is contesting it|"
        "keeps an ice scraper in their backpack all winter|borrowed a friend's van to "
        "move furniture last {month}",
        month=MONTHS,
        year=YEARS,
    ),
    # education (past and side courses; no degree)
    _t(
        "education",
        (
            "the user took an online course in {key} in {year}.",
            "the user attended a weekend workshop on {key}.",
        ),
        "data visualization|Italian cooking|photography basics|personal finance|"
        "creative writing|wilderness first aid|Excel|negotiation|web design|art "
        "restoration|music theory|psychology|nutrition|urban gardening|typography",
        year=YEARS,
    ),
    _t(
        "education",
        "the user {key}.",
        "won a spelling bee in fifth grade|was the yearbook editor in high school|"
        "did a semester exchange in Montreal|still has their school recorder|"
        "keeps in touch with their third-grade teacher|went to a Montessori school",
    ),
    # memories and anecdotes
    _t(
        "memories",
        "the user once {key}.",
        "met an astronaut at a book signing|got lost on a Mammoth Cave tour|worked "
        "summers at an ice cream shop|saw a tornado up close|sang in a school choir as "
        "a teenager|ran a lemonade stand that made $200|lived in Ohio for a year|camped in "
        "the Boundary Waters|appeared as an extra in a movie|found a wallet with $500 "
        "and returned it|got stuck in an elevator for two hours|shook hands with a "
        "senator|locked themselves out in a snowstorm",
    ),
    # goals
    _t(
        "goals",
        "the user wants to {key} {when}.",
        "read fifty books|hike a stretch of the Appalachian Trail|save three months of "
        "expenses|declutter the closet|finish a quilt|climb a fourteener in Colorado|"
        "complete a hundred-day drawing challenge|visit every national park in the "
        "Midwest|cook a new recipe every week|learn to make croissants|write a short "
        "story|plant a community garden bed",
        when="this year|by next summer|before turning forty|someday|by the end of the year",
    ),
    # neighbours
    _t(
        "neighbours",
        "the user's neighbour {key} {fact}.",
        NEIGHBOURS,
        fact="plays the cello late in the evening|grows tomatoes on the fire escape|waters "
        "the user's plants when they are away|is a retired firefighter|brings over "
        "tamales at Christmas|has lived in the building for forty years|runs a "
        "book swap in the lobby|shovels the sidewalk for everyone|teaches piano lessons|"
        "keeps bees on the roof",
    ),
    # preferences
    _t(
        "preferences",
        "the user prefers {key}.",
        "window seats on trains|stairs to elevators|handwritten notes to texts|"
        "mountains to beaches|paper maps for hiking|aisle seats at the theater|"
        "early movie showings|unscented candles|fountain pens|cold weather to hot",
    ),
    _t(
        "preferences",
        ("the user is annoyed by {key}.", "the user has no patience for {key}."),
        "people who recline their seat all the way|loud chewing|reply-all emails|"
        "slow walkers on the sidewalk|wet socks",
    ),
    _t(
        "preferences",
        "the user would love to adopt a {key} someday.",
        "rabbit|parrot|tortoise|pair of guinea pigs",
    ),
    _t(
        "preferences",
        "the user keeps {key}.",
        "a bullet journal|a gratitude list on the fridge|every password in a password "
        "manager|a spreadsheet of every book read|a daily step goal of 10,000|"
        "notifications off after 9 pm|a dream diary|a jar of coins for the laundromat",
    ),
    # more of the user's life
    _t(
        "city",
        ("the user visited {key} in {month}.", "the user has a soft spot for {key}."),
        "the Field Museum|the Museum of Science and Industry|the Shedd Aquarium|"
        "the Adler Planetarium|the Museum of Contemporary Art|the National Museum of "
        "Mexican Art|the Chicago History Museum|the DuSable Museum|the Oriental Institute|"
        "the Lincoln Park Zoo|the Chicago Botanic Garden|the Morton Arboretum|"
        "the Newberry Library|the Driehaus Museum|the Garfield Park lagoon",
        month=MONTHS,
    ),
    _t(
        "music",
        ("the user went to {key} in {year}.", "the user bought early-bird passes for {key} once."),
        "Lollapalooza|Pitchfork Music Festival|the Chicago Blues Festival|Taste of "
        "Chicago|Riot Fest|the Newport Folk Festival|Austin City Limits|the Printers Row "
        "Lit Fest|the Chicago Air and Water Show|the Pride Parade|the Old Town Art Fair|"
        "the Ravinia summer series|Summerfest in Milwaukee|the World Music Festival",
        year=YEARS,
    ),
    _t(
        "style",
        "the user has a small tattoo of {key} on their {place}.",
        "a compass|a fern|a paper crane|a crescent moon|a bee|a wave|a mountain range|"
        "a lighthouse|their grandfather's initials|a sunflower",
        place="wrist|ankle|shoulder|forearm|ribs",
    ),
    _t(
        "habits",
        "the user always {key}.",
        "carries an umbrella|arrives ten minutes early|writes thank-you cards|reads the "
        "last page of a book first|hums while cooking|labels leftovers|keeps receipts in "
        "an envelope|double-checks that the stove is off|brings a tote bag to the store|"
        "answers emails before lunch|tips generously|waves at dogs",
    ),
    _t(
        "habits",
        "the user is scared of {key}.",
        "spiders|clowns|snakes|escalators|wasps|bats|moths",
    ),
    _t(
        "home",
        "the user grows {key} in pots on the fire escape.",
        "mint|chives|cherry tomatoes|lettuce|strawberries|sweet peppers|thyme|"
        "nasturtiums|rosemary|marigolds",
    ),
    _t(
        "home",
        "the user's landlord {key}.",
        "raised the rent by five percent this year|is slow to fix the radiator|"
        "allows no grills on the balcony|is named Mr. Petrakis|lives on the first floor|"
        "replaced the windows last fall",
    ),
    _t(
        "books",
        (
            "the user has read every book by {key}.",
            "the user went to a reading by {key} in {year}.",
        ),
        "Ursula K. Le Guin|Toni Morrison|Kazuo Ishiguro|Haruki Murakami|Octavia Butler|"
        "Jane Austen|Terry Pratchett|Agatha Christie|Zadie Smith|Neil Gaiman|"
        "Barbara Kingsolver|Colson Whitehead|N. K. Jemisin|Ann Patchett|George Saunders|"
        "Louise Erdrich|Donna Tartt|Hilary Mantel|Kurt Vonnegut|Mary Oliver",
        year=YEARS,
    ),
    _t(
        "films",
        "the user watched a documentary about {key} {when}.",
        "the deep sea|the history of typography|octopuses|the moon landing|"
        "urban beekeeping|competitive crossword solving|the Great Chicago Fire|"
        "a Michelin-starred bakery|the making of Lego|free solo climbing|the life of "
        "Fred Rogers|glaciers|the Beatles' rooftop concert|mushrooms",
        when="last weekend|on a rainy evening|twice|with friends|during a long weekend",
    ),
    _t(
        "hobbies",
        ("the user skied at {key} in {year}.", "the user spent a weekend at {key}."),
        "Wilmot Mountain|Boyne Mountain|Lutsen Mountains|Granite Peak|Cascade Mountain|"
        "Devil's Head|Crystal Mountain|Caberfae Peaks|Mount Bohemia|Chestnut Mountain",
        year=YEARS,
    ),
    _t(
        "hobbies",
        ("the user hiked {key} in {month}.", "the user wants to hike {key} again."),
        "the Ice Age Trail|the Superior Hiking Trail|the Porcupine Mountains|"
        "Devil's Lake|the Shawnee National Forest|Turkey Run State Park|"
        "Pictured Rocks|the Kettle Moraine|Matthiessen State Park|"
        "the Dunes Succession Trail|Interstate State Park|Wildcat Den",
        month=MONTHS,
    ),
    _t(
        "devices",
        "the user uses the {key} app {purpose}.",
        "Notion|Todoist|Goodreads|Headspace|YNAB|Libby|Merlin Bird ID|AllTrails|"
        "Letterboxd|Splitwise|Anki|Paprika|Google Keep|Transit|Seek",
        purpose="every day|to stay organized|on weekends|more than they would like|"
        "for hobby projects",
    ),
    _t(
        "friends",
        "the user belongs to {key}.",
        "a neighbourhood book club|a community garden plot co-op|a birding society|"
        "a film society|the library's Friends group|a hiking meetup|a pottery studio "
        "co-op|a tenants' association|a choir that meets on Tuesdays|a trivia team "
        "at the local pub",
    ),
    _t(
        "friends",
        "the user's friend {key} has a {animal} named {name}.",
        _first(FRIENDS, 60),
        animal="beagle|parrot|tabby|corgi|tortoise|rabbit|greyhound|pair of goldfinches",
        name="Biscuit|Pepper|Juniper|Moose|Olive|Captain|Noodle|Pickles|Waffles|Clementine",
    ),
    _t(
        "neighbours",
        "the user's neighbour {key} is originally from {place}.",
        NEIGHBOURS,
        place=CITIES,
    ),
    _t(
        "food",
        "the user tried making {key} for the first time {when}.",
        "vegetable pot pie|mushroom wellington|spinach and feta borek|sweet corn fritters|"
        "onion tart|beet risotto|chickpea salad sandwiches|zucchini bread|leek and potato "
        "soup|a tomato galette|cheese souffle|lemon ricotta pancakes|baked falafel|a "
        "vegetable terrine|spring rolls|maple-glazed carrots|a three-bean stew|"
        "stuffed shells|a carrot and ginger soup|cornbread|apple crumble|a pear tarte "
        "tatin|homemade ravioli|black bean soup|a mushroom barley soup|vegetable fried "
        "rice|a kale caesar salad|roasted cauliflower wedges|polenta fries|a sweet potato hash",
        when="last weekend|for a potluck|in March|over the holidays|on a snow day",
    ),
    _t(
        "work",
        "the user {key} at work last {month}.",
        "calmed a frightened patient during a fire drill|caught a medication mix-up|"
        "organized a baby shower for a colleague|precepted a new graduate|stayed late "
        "through a snowstorm|got a thank-you card from a patient's family|"
        "led a training on the new infusion pumps|helped set up a flu shot clinic|"
        "judged the unit's soup cook-off|was nominated for a Daisy award|"
        "mediated a scheduling dispute|found a lost wedding ring in the linens|"
        "reorganized the break room|gave a tour to new interns|redesigned "
        "the supply closet",
        month=MONTHS,
    ),
    _t(
        "hobbies",
        ("the user is working on {key}.", "the user finally finished {key}."),
        "a quilt for their father|a scale model of the Chicago Theatre|a family photo "
        "book|a birdhouse for the fire escape|a photo series of Chicago doorways|a "
        "cross-stitch of the skyline|an illustrated storybook|a zine about diners|a "
        "mosaic tabletop|a hand-bound notebook|a jigsaw of the Sistine Chapel|a "
        "watercolor of Lake Michigan|a podcast about neighbourhood history|a wooden "
        "bookshelf|a map of every park they have visited|a short film with friends|"
        "a recipe book of family dishes|a rag rug|a Lego model of the Willis Tower|a "
        "pressed-flower collage|a terrarium|a set of ceramic mugs|a Halloween costume|"
        "a botanical sketchbook|a ukulele cover of a Beatles song",
    ),
    _t(
        "health",
        "the user tracks {key} with a smartwatch.",
        "their resting heart rate|daily steps|how much water they drink|stress "
        "levels|their heart rate variability|workouts|standing hours|walking distance",
    ),
    _t(
        "shopping",
        (
            "the user recently returned {key} to the store.",
            "the user had to send back {key}.",
        ),
        "a pair of boots that pinched|a lamp with a wobbly base|a too-small rain jacket|"
        "a blender that leaked|a duvet cover in the wrong size|a backpack with a broken "
        "zipper|a set of mismatched plates|a noisy desk fan|a scratched picture frame|"
        "a pair of wool gloves|a kettle that rusted|a yoga block|a houseplant pot with "
        "no drainage hole|a toaster|a cordless vacuum|a bath mat|a shower curtain|a "
        "laundry hamper|a wall clock|a pair of rain boots",
    ),
    _t(
        "memories",
        "the user remembers {key} vividly.",
        "the polar vortex of 2019|the Cubs winning the 2016 World Series|the 2011 "
        "blizzard|the first day of nursing school|the lake freezing over in 2014|a "
        "power outage that lasted three days|their first snowfall in Chicago|the "
        "Bulls' sixth title in 1998",
    ),
    _t(
        "traditions",
        "the user celebrates {key} {how}.",
        "Thanksgiving|Lunar New Year|Christmas Eve|the Fourth of July|Halloween|"
        "New Year's Eve|Día de los Muertos|Juneteenth|Mardi Gras|Saint Patrick's Day",
        how="with friends|with their father|at a neighbour's|with a big potluck|"
        "quietly at home|with coworkers",
    ),
    _t(
        "learning",
        "the user has been reading about {key} lately.",
        "the history of the Great Lakes|sleep science|urban planning|the Silk Road|"
        "octopus intelligence|the Chicago Fire of 1871|fermentation|the Apollo program|"
        "bird migration|typography|the Harlem Renaissance|volcanoes|the history of "
        "medicine|Stoic philosophy|tiny homes|the science of habits|ancient Rome|"
        "mycology|the deep ocean|architecture of the Prairie School",
    ),
    _t(
        "opinions",
        "the user thinks {key}.",
        "deep-dish pizza is overrated|the Bean looks best at sunrise|winter is the best "
        "season in the city|audiobooks count as reading|pineapple belongs on pizza|"
        "the Riverwalk is underrated|the Cultural Center is the best free attraction in town|every "
        "kitchen needs a good bread knife|the library is the best deal in town|movie "
        "theaters should bring back intermissions|handwriting is a lost art|the L "
        "needs more trains at rush hour|the best tomatoes come in August|the lake "
        "is warmest in early September|board meetings should be shorter",
    ),
    _t(
        "wishes",
        "the user would like {key} for their birthday.",
        "a Dutch oven|a polaroid camera|a pottery wheel lesson|a new bird guide|"
        "a tea sampler|a silk pillowcase|a fountain pen|a houseplant subscription|"
        "a weekend at a cabin in Galena|a woven blanket from a local maker|"
        "concert tickets|a good chef's knife|a star map print|a vintage record player|"
        "a day at a spa",
    ),
    _t(
        "services",
        "the user's {key} is {name}.",
        "dentist|tailor|dermatologist|tax preparer|piano teacher|therapist|physiotherapist|cobbler",
        name="Dr. Alvarez|Ms. Chen|Mr. Brooks|Dr. Osei|Ms. Novak|Mr. Ruiz|Dr. Patel|Ms. Lindgren",
    ),
    _t(
        "city",
        "the user's block has {key}.",
        "a little free library|a taco truck on Fridays|a mural of Lake Michigan|"
        "a community fridge|a corner bakery|a hardware store that has been there since "
        "1952|a playground with a zip line|a laundromat with an arcade machine",
    ),
    _t(
        "personal",
        "the user's birthday is on {month} {day}.",
        "birthday",
        month=MONTHS,
        day="3|9|12|17|21|28",
    ),
    _t(
        "personal",
        "the user grew up in {place}.",
        "hometown",
        place="Peoria|Rockford|Dayton|Green Bay|Fort Wayne|Cedar Rapids|Toledo|Lansing",
    ),
    _t("personal", "the user is {height} tall.", "height", height="5'4\"|5'7\"|5'10\"|6'1\""),
)


def _fill_rng(seed: int | str) -> random.Random:
    return random.Random(f"consolidation-filler-{seed}")


def filler_capacity() -> int:
    """The most filler facts one user can be given."""
    return sum(len(t.key) for t in TEMPLATES)


def filler_facts(count: int, seed: int | str = 0) -> list[str]:
    """``count`` distinct filler facts for one user, drawn from every domain in turn
    (the same ``seed``, the same facts; another seed, another draw).

    Raises:
        ValueError: ``count`` is more than :func:`filler_capacity`.
    """
    if count > filler_capacity():
        raise ValueError(f"at most {filler_capacity()} filler facts, not {count}")
    rng = _fill_rng(seed)
    streams = [t.facts(random.Random(rng.random())) for t in TEMPLATES]
    order = list(range(len(streams)))
    rng.shuffle(order)
    out: list[str] = []
    seen_texts: set[str] = set()
    seen_terms: set[frozenset[str]] = set()
    while len(out) < count and order:
        for i in list(order):
            fact = next(streams[i], None)
            if fact is None:
                order.remove(i)
                continue
            terms = _terms(fact)
            if fact in seen_texts or terms in seen_terms:  # a near-duplicate: same terms
                continue
            seen_texts.add(fact)
            seen_terms.add(terms)
            out.append(fact)
            if len(out) == count:
                break
    if len(out) < count:
        raise ValueError(f"only {len(out)} distinct filler facts, not {count}")
    rng.shuffle(out)
    return out


def check_filler(facts: Sequence[str]) -> None:
    """Raise ``AssertionError`` if a filler fact does not start with "The user", holds
    a banned term (a pair's attribute), or repeats."""
    assert len(set(facts)) == len(facts), "filler facts repeat"
    for fact in facts:
        assert fact.startswith("The user"), fact
        banned = _terms(fact) & BANNED_TERMS
        assert not banned, f"filler {fact!r} holds {sorted(banned)}"
