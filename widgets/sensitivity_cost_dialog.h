#pragma once
// Quantize > Run Sensitivity asks first what the sweep will cost and lets the user make it
// cheaper: one evaluation pass per layer over the evaluation set is ~30 s per layer on a
// 135M-parameter LM on 2 cores (~1:45:00 for smollm2-135m's 211 layers at 8 windows). The
// dialog shows the estimate from core (workspace::sensitivityCost: the layers, one timed
// evaluation window or batch) and recomputes it as the user picks fewer evaluation windows or
// samples and a subset of layers by name; it only gathers the choice, the window runs the sweep.

#include "workspace/workspace.h"

#include <QDialog>
#include <QString>

#include <string>
#include <vector>

class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace bitlens::widgets {

class SensitivityCostDialog : public QDialog {
    Q_OBJECT

public:
    /// `cost` as workspace::sensitivityCost measured it for the scheme `scheme`.
    SensitivityCostDialog(const workspace::SensitivityCost& cost, const QString& scheme,
                          QWidget* parent = nullptr);

    /// Evaluation units chosen (windows, samples, lines): 1 .. cost.evalUnits.
    std::int64_t evalUnits() const;
    void setEvalUnits(std::int64_t units);
    /// The name filters typed ("down_proj, o_proj" -> {"down_proj", "o_proj"}); empty: all.
    std::vector<std::string> layerFilters() const;
    void setLayerFilter(const QString& text);
    /// Layers the sweep will run with the current filter.
    std::int64_t layers() const;
    /// The estimate for the current choice, seconds.
    double seconds() const;
    /// The estimate's text as shown ("about 1:45:00 on this machine").
    QString estimateText() const;

private:
    void update();

    workspace::SensitivityCost m_cost;
    QSpinBox* m_units;
    QLineEdit* m_filter;
    QLabel* m_layers;
    QLabel* m_estimate;
    QPushButton* m_run = nullptr;
};

} // namespace bitlens::widgets
