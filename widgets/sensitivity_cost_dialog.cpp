#include "sensitivity_cost_dialog.h"

#include "analysis/layer_filter.h"
#include "jobs/step_clock.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>

namespace bitlens::widgets {

SensitivityCostDialog::SensitivityCostDialog(const workspace::SensitivityCost& cost,
                                             const QString& scheme, QWidget* parent)
    : QDialog(parent), m_cost(cost), m_units(new QSpinBox), m_filter(new QLineEdit),
      m_layers(new QLabel), m_estimate(new QLabel)
{
    setObjectName(QStringLiteral("sensitivityCostDialog"));
    setWindowTitle(tr("Run sensitivity"));
    setMinimumWidth(480);
    auto* intro = new QLabel(
        tr("The sweep quantizes each layer alone with %1 and evaluates the model once per "
           "layer%2. Its time grows with the layers and the evaluation data; choose fewer of "
           "either to make it shorter.")
            .arg(scheme, cost.byKld ? tr(" (twice: float and quantized, for the KL divergence)")
                                    : QString()));
    intro->setWordWrap(true);

    m_units->setObjectName(QStringLiteral("sensitivityUnits"));
    const int most = static_cast<int>(
        std::min<std::int64_t>(cost.evalUnits, std::numeric_limits<int>::max()));
    m_units->setRange(1, std::max(1, most));
    m_units->setValue(std::max(1, most));
    m_units->setSuffix(QStringLiteral(" ") + QString::fromStdString(cost.unit));
    m_units->setToolTip(tr("The first N of the %1 %2 of the evaluation data are evaluated for "
                           "each layer.")
                            .arg(cost.evalUnits)
                            .arg(QString::fromStdString(cost.unit)));
    m_filter->setObjectName(QStringLiteral("sensitivityLayerFilter"));
    m_filter->setPlaceholderText(tr("every layer; or e.g. down_proj, o_proj"));
    m_filter->setToolTip(tr("Only layers whose name contains one of these (comma-separated) "
                            "are swept."));
    m_layers->setObjectName(QStringLiteral("sensitivityLayerCount"));
    m_estimate->setObjectName(QStringLiteral("sensitivityEstimate"));
    m_estimate->setWordWrap(true);

    auto* form = new QFormLayout;
    form->addRow(tr("Evaluate on"), m_units);
    form->addRow(tr("Only layers named"), m_filter);
    form->addRow(tr("Layers"), m_layers);
    form->addRow(tr("Estimate"), m_estimate);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    m_run = buttons->button(QDialogButtonBox::Ok);
    m_run->setText(tr("Run sweep"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_units, &QSpinBox::valueChanged, this, &SensitivityCostDialog::update);
    connect(m_filter, &QLineEdit::textChanged, this, &SensitivityCostDialog::update);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(intro);
    layout->addLayout(form);
    layout->addWidget(buttons);
    update();
}

std::int64_t SensitivityCostDialog::evalUnits() const { return m_units->value(); }

void SensitivityCostDialog::setEvalUnits(std::int64_t units)
{
    m_units->setValue(static_cast<int>(units));
}

std::vector<std::string> SensitivityCostDialog::layerFilters() const
{
    std::vector<std::string> out;
    for (const QString& part : m_filter->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        const QString name = part.trimmed();
        if (!name.isEmpty())
            out.push_back(name.toStdString());
    }
    return out;
}

void SensitivityCostDialog::setLayerFilter(const QString& text) { m_filter->setText(text); }

std::int64_t SensitivityCostDialog::layers() const
{
    const auto filters = layerFilters();
    return std::count_if(m_cost.layerNames.begin(), m_cost.layerNames.end(),
                         [&](const std::string& name) {
                             return analysis::sweepsLayer(filters, name);
                         });
}

double SensitivityCostDialog::seconds() const { return m_cost.seconds(layers(), evalUnits()); }

QString SensitivityCostDialog::estimateText() const
{
    if (layers() == 0)
        return tr("No quantized layer's name contains that: nothing to sweep.");
    QString text = tr("about %1 on this machine: %2 evaluation passes of %3 %4, at %5 s per "
                      "%6 as measured now")
                       .arg(QString::fromStdString(clockText(seconds())))
                       .arg(m_cost.passes(layers()))
                       .arg(evalUnits())
                       .arg(QString::fromStdString(m_cost.unit))
                       .arg(m_cost.secondsPerUnit, 0, 'g', 3)
                       .arg(m_cost.unit.rfind("windows", 0) == 0 ? tr("window")
                            : m_cost.unit == "lines"             ? tr("line")
                                                                 : tr("sample"));
    if (m_cost.needsCalibration)
        text += tr(", after calibration");
    return text + QLatin1Char('.');
}

void SensitivityCostDialog::update()
{
    m_layers->setText(tr("%1 of %2 quantized layers")
                          .arg(layers())
                          .arg(static_cast<qlonglong>(m_cost.layerNames.size())));
    m_estimate->setText(estimateText());
    m_run->setEnabled(layers() > 0);
}

} // namespace bitlens::widgets
