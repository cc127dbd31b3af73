
# --- saql's anomaly models (OUTLIER, INVARIANT) as Flink keyed process functions ---------------
#
# A query with OUTLIER or INVARIANT runs in two parts: Flink SQL computes its results (plus the
# PARTITION BY / value / PER expressions as extra columns), then a KeyedProcessFunction of the
# DataStream API applies the model in event time, mirroring src/operators/outlier.rs and
# src/operators/invariant.rs: rows wait in keyed state until the watermark passes their time (an
# event-time timer), so a model sees exactly the rows saql's operator sees when its watermark
# passes them, whatever the parallelism and arrival order.

import datetime
import math

EPOCH = datetime.datetime(1970, 1, 1)


def millis(value):
    """Event time of a result column value (a naive datetime) in milliseconds."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return (value.replace(tzinfo=None) - EPOCH) // datetime.timedelta(milliseconds=1)
    return int(value)


def rust_float(x):
    """An f64 as Rust's Display writes it: 3 not 3.0, no exponent."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "NaN"
    if x.is_integer():
        return str(int(x))
    text = repr(x)
    if "e" in text:
        text = format(x, "f").rstrip("0").rstrip(".")
    return text


def arrow_text(value, kind):
    """A value as Arrow's display writes it (the violation column quotes learned values)."""
    if value is None:
        return "NULL"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value))
    if kind == "timestamp":
        return value.isoformat()
    return str(value)


def distance(a, b):
    return math.sqrt(sum((x - y) * (x - y) for x, y in zip(a, b)))


def quantile(values, q):
    if not values:
        return float("nan")
    pos = q * (len(values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def median(values):
    return quantile(sorted(values), 0.5)


def nearest(point, centroids):
    return min((distance(point, c) for c in centroids), default=float("inf"))


def kmeans(points, k):
    """Lloyd's k-means, farthest-point start, 50 rounds at most (as saql's)."""
    k = max(1, min(k, len(points)))
    centroids = [list(points[0])]
    while len(centroids) < k:
        far, far_d = None, None
        for p in points:
            d = nearest(p, centroids)
            if far_d is None or d >= far_d:  # the last of equals, as Rust's max_by
                far, far_d = p, d
        centroids.append(list(far))
    dims = len(points[0])
    for _ in range(50):
        sums = [[0.0] * dims for _ in range(k)]
        counts = [0] * k
        for p in points:
            best = min(range(k), key=lambda c: distance(p, centroids[c]))
            counts[best] += 1
            for d in range(dims):
                sums[best][d] += p[d]
        moved = False
        for c in range(k):
            if counts[c] == 0:
                continue
            nxt = [s / counts[c] for s in sums[c]]
            if nxt != centroids[c]:
                moved = True
                centroids[c] = nxt
        if not moved:
            break
    return centroids


def per_dimension(points, score_of):
    """The largest score over the dimensions; score_of(values) gives one per point."""
    scores = [0.0] * len(points)
    for d in range(len(points[0])):
        for i, s in enumerate(score_of([p[d] for p in points])):
            scores[i] = max(scores[i], s)
    return scores


def zscores(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    return [abs(v - mean) / sd if sd > 0 else 0.0 for v in values]


def mad_scores(values):
    med = median(values)
    mad = median([abs(v - med) for v in values])
    if mad > 0:
        return [0.6745 * abs(v - med) / mad for v in values]
    return [0.0 if v == med else float("inf") for v in values]


def iqr_scores(values, factor):
    ordered = sorted(values)
    q1, q3 = quantile(ordered, 0.25), quantile(ordered, 0.75)
    iqr = q3 - q1
    lo, hi = q1 - factor * iqr, q3 + factor * iqr
    out = []
    for v in values:
        beyond = lo - v if v < lo else (v - hi if v > hi else 0.0)
        out.append(0.0 if beyond == 0.0 else (beyond / iqr if iqr > 0 else float("inf")))
    return out


def dbscan(points, eps, min_points):
    n = len(points)
    core = [i for i in range(n)
            if sum(1 for q in points if distance(points[i], q) <= eps) >= min_points]
    out = []
    for i in range(n):
        near = min((distance(points[i], points[c]) for c in core), default=float("inf"))
        if near <= eps:
            out.append((False, near))
            continue
        if not core:
            near = min((distance(points[i], points[j]) for j in range(n) if j != i),
                       default=float("inf"))
        out.append((True, near if math.isfinite(near) else 0.0))
    return out


def detect(method, points):
    """(is_outlier, score) per point, as saql's `detect`."""
    if not points:
        return []
    name = method["name"]
    if name == "dbscan":
        return dbscan(points, method["eps"], method["min_points"])
    if name == "kmeans":
        centroids = kmeans(points, method["k"])
        return [(d > method["threshold"], d) for d in (nearest(p, centroids) for p in points)]
    if name == "zscore":
        scores = per_dimension(points, zscores)
        return [(s > method["threshold"], s) for s in scores]
    if name == "mad":
        scores = per_dimension(points, mad_scores)
        return [(s > method["threshold"], s) for s in scores]
    scores = per_dimension(points, lambda v: iqr_scores(v, method["factor"]))
    return [(s > 0.0, s) for s in scores]


def make_outlier(model, KeyedProcessFunction, ListStateDescriptor, Types, Row):
    """OUTLIER: each (PARTITION BY values, window) group's rows wait until the watermark passes
    the window (its window_time), then are compared with each other."""
    width = model["width"]
    on = model["on"]

    class OutlierFunction(KeyedProcessFunction):
        def open(self, runtime_context):
            self.rows = runtime_context.get_list_state(
                ListStateDescriptor("rows", Types.PICKLED_BYTE_ARRAY()))

        def process_element(self, value, ctx):
            self.rows.add((ctx.timestamp(), tuple(value[i] for i in range(width))))
            ctx.timer_service().register_event_time_timer(ctx.timestamp())

        def on_timer(self, timestamp, ctx):
            # Only this window's rows (a later window's may be here when the partition has
            # no window column).
            stored = list(self.rows.get() or [])
            rows = [row for t, row in stored if t <= timestamp]
            self.rows.update([(t, row) for t, row in stored if t > timestamp])
            points = []
            members = []
            for i, row in enumerate(rows):
                point = [row[c] for c in on]
                if all(v is not None for v in point):
                    points.append([float(v) for v in point])
                    members.append(i)
            found = {}
            for i, result in zip(members, detect(model["method"], points)):
                found[i] = result
            for i, row in enumerate(rows):
                flag, score = found.get(i, (False, None))
                yield Row(*row, flag, score)

    return OutlierFunction()


def make_invariant(model, KeyedProcessFunction, ListStateDescriptor, ValueStateDescriptor,
                   Types, Row):
    """INVARIANT: one task sees every result (the training period starts at the query's first
    result, over all keys) in event-time order, ties in arrival order: rows wait until the
    watermark passes them, then are learned from or checked."""
    width = model["width"]
    values = model["values"]
    keys = model["keys"]
    kinds = model["value_kinds"]
    names = model["value_names"]
    time_index = model["time"]
    training = model["training"]
    online = model["online"]

    class InvariantFunction(KeyedProcessFunction):
        def open(self, runtime_context):
            self.waiting = runtime_context.get_list_state(
                ListStateDescriptor("waiting", Types.PICKLED_BYTE_ARRAY()))
            self.state = runtime_context.get_state(
                ValueStateDescriptor("learned", Types.PICKLED_BYTE_ARRAY()))
            self.seq = runtime_context.get_state(
                ValueStateDescriptor("seq", Types.LONG()))

        def process_element(self, value, ctx):
            seq = (self.seq.value() or 0) + 1
            self.seq.update(seq)
            self.waiting.add((ctx.timestamp(), seq, tuple(value[i] for i in range(width)),
                              tuple(value[i] for i in values), tuple(value[i] for i in keys)))
            ctx.timer_service().register_event_time_timer(ctx.timestamp())

        def on_timer(self, timestamp, ctx):
            waiting = list(self.waiting.get() or [])
            ready = sorted((w for w in waiting if w[0] <= timestamp), key=lambda w: (w[0], w[1]))
            rest = [w for w in waiting if w[0] > timestamp]
            self.waiting.update(rest)
            if not ready:
                return
            state = self.state.value() or {"learned": {}, "windows": [], "train_end": None}
            for _, _, row, vals, key in ready:
                message = check(state, millis(row[time_index]), vals, key)
                if message is not None:
                    yield Row(*row, message)
            self.state.update(state)

    def in_training(state, t):
        if t is None:
            return False
        if training["kind"] == "windows":
            if t in state["windows"]:
                return True
            if len(state["windows"]) < training["n"]:
                state["windows"].append(t)
                return True
            return False
        if state["train_end"] is None:
            state["train_end"] = t + training["millis"]
        return t < state["train_end"]

    def check(state, t, vals, key):
        learning = in_training(state, t)
        learned = state["learned"].setdefault(key, {"set": set(), "range": None})
        if model["set"]:
            known = learned["set"]
            if learning or online:
                new = vals not in known
                if new:
                    known.add(vals)
                count = len(known) - 1 if (not learning and new) else None
            else:
                count = None if vals in known else len(known)
            if count is None:
                return None
            shown = ", ".join(arrow_text(v, k) for v, k in zip(vals, kinds))
            return f"({', '.join(names)}) = ({shown}) was not among the {count} values learned"
        if learned["range"] is None:
            learned["range"] = [None] * len(vals)
        broken = []
        for i, v in enumerate(vals):
            if v is None:
                continue
            x = float(millis(v) * 1_000_000) if kinds[i] == "timestamp" else float(v)
            shown = arrow_text(v, kinds[i])
            bounds = learned["range"][i]
            if bounds is not None and not learning and (x < bounds[0] or x > bounds[1]):
                broken.append(f"{names[i]} = {shown} outside the learned range "
                              f"[{rust_float(bounds[0])}, {rust_float(bounds[1])}]")
            elif bounds is None and not learning:
                broken.append(f"{names[i]} = {shown} with nothing learned")
            if learning or online:
                learned["range"][i] = ((x, x) if bounds is None
                                       else (min(bounds[0], x), max(bounds[1], x)))
        return "; ".join(broken) if broken else None

    return InvariantFunction()


def python_type(name, Types):
    return {
        "STRING": Types.STRING(), "BIGINT": Types.LONG(), "INT": Types.INT(),
        "SMALLINT": Types.SHORT(), "DOUBLE": Types.DOUBLE(), "FLOAT": Types.FLOAT(),
        "BOOLEAN": Types.BOOLEAN(), "TIMESTAMP(3)": Types.SQL_TIMESTAMP(),
    }[name]


def apply_model(env, query):
    """Registers `<query>__model`: the query's SQL results through its model function."""
    from pyflink.common import Row, Types
    from pyflink.datastream import KeyedProcessFunction
    from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

    model = query["model"]
    stream = env.to_data_stream(env.sql_query(model["select"]))
    out_type = Types.ROW_NAMED(model["out_columns"],
                               [python_type(t, Types) for t in model["out_types"]])
    if model["kind"] == "outlier":
        partition = model["partition"]
        keyed = stream.key_by(lambda r: repr(tuple(r[i] for i in partition)),
                              key_type=Types.STRING())
        function = make_outlier(model, KeyedProcessFunction, ListStateDescriptor, Types, Row)
    else:
        keyed = stream.key_by(lambda r: 0, key_type=Types.INT())
        function = make_invariant(model, KeyedProcessFunction, ListStateDescriptor,
                                  ValueStateDescriptor, Types, Row)
    result = keyed.process(function, output_type=out_type)
    env.create_temporary_view(query["name"] + "__model", env.from_data_stream(result))
